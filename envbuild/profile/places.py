"""Where a profile problem is: the file that set a key, and the problems only the catalog can see.

Every problem of a profile is an :class:`~envbuild.errors.Issue` (``FILE: KEY: what is wrong``) and a
profile's problems are raised together, as one :class:`~envbuild.errors.ProfileError` (``E-PROFILE``):

* the loader (:mod:`envbuild.profile.loader`) finds the problems of each file on its own (keys, types,
  values).  It does not read the catalog, so when it raises it hands the values only the catalog can
  judge (``accelerator.targets`` entries, ``torch.version``) on as :class:`~envbuild.errors.Pending`;
  the command line (:func:`envbuild.cli.app.handle_errors`) checks them with :func:`catalog_issues`
  before it reports, so that an unknown target comes out with a key typo, not after it is fixed;
* the planner (:mod:`envbuild.plan`) checks the same values of a profile that loaded clean
  (:func:`pending_of`, :func:`catalog_issues`) and raises what it finds together.

A ``--target`` given on the command line is not a profile problem (``E-USAGE``, named ``--target``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from envbuild.errors import Issue, Pending, choices
from envbuild.models import Profile

if TYPE_CHECKING:
    from envbuild.catalog import Catalog

REFRESH_HINT = (
    "`envbuild catalog refresh` adds releases published since this catalog, and `envbuild check "
    "--resolve` asks the index"
)


def key_file(profile: Profile, key: str) -> str:
    """The file that set ``key`` (``accelerator.targets[1]`` is looked up as ``accelerator.targets``):
    the parent's file (``builtin:pytorch``, or its path) for an inherited key, else the profile's own."""
    origin = profile.origins.get(key) or profile.origins.get(key.partition("[")[0])
    if origin is None or not origin.inherited:
        return profile.path
    if origin.file.startswith("builtin:") or profile.folder is None:
        return origin.file
    return str(Path(profile.folder) / origin.file)


def issue(profile: Profile, key: str, message: str) -> Issue:
    """A problem with ``key`` of a loaded profile, named by the file that set it."""
    return Issue(key_file(profile, key), key, message)


def unknown_target(catalog: Catalog, target: str) -> str:
    """Why ``target`` is no card id, with a did-you-mean and every valid id."""
    import difflib  # on a miss only

    ids = catalog.card_ids()
    close = difflib.get_close_matches(target, ids, n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return f"unknown target {target!r}{hint}; valid targets: {choices(ids)} (see `envbuild targets`)"


def newest_ga(catalog: Catalog) -> str:
    """The newest patch of the newest confirmed (``ga``) torch series."""
    ga = [r for r in catalog.releases if r.status == "ga"]
    return max(ga, key=lambda r: Version(r.series)).patch[-1].version


def unknown_torch(catalog: Catalog, head: str, version: str) -> str:
    """Why torch ``version`` names nothing in the catalog, and what to write instead; ``head`` names
    it (``torch.version = "2.99.0"``, ``torch==2.99.0``)."""
    try:
        parsed: Version | None = Version(version)
    except InvalidVersion:
        parsed = None
    if parsed is not None and (parsed.is_prerelease or parsed.is_devrelease):
        known = catalog.find_torch(parsed.base_version)
        alt = f"use the published release {known[1].version}" if known else f"use {newest_ga(catalog)}"
        return (
            f"{head} is a pre-release/nightly build: those live on download.pytorch.org/whl/test or "
            f"/whl/nightly and are not planned by envbuild; {alt}"
        )
    series = catalog.find_series(version)
    if series is not None:
        patches = ", ".join(p.version for p in series.patch)
        return (
            f"{head} is not a published {series.series} release; torch {series.series} has "
            f"{patches}: write one of them, or {series.series!r} for the newest patch"
        )
    listing = ", ".join(r.series for r in catalog.releases)
    return (
        f"{head} is not a release envbuild knows (series {listing}); "
        f"choose a published release such as {newest_ga(catalog)}"
    )


def pending(
    file_of: Callable[[str], str], targets: Sequence[str], torch_version: str | None
) -> list[Pending]:
    """The values :func:`catalog_issues` judges, each with its file (``file_of(key)``) and key."""
    found = [
        Pending(file_of("accelerator.targets"), f"accelerator.targets[{i}]", t) for i, t in enumerate(targets)
    ]
    if torch_version is not None:
        found.append(Pending(file_of("torch.version"), "torch.version", torch_version))
    return found


def pending_of(profile: Profile, *, targets: bool = True, torch: bool = True) -> list[Pending]:
    """:func:`pending` of a loaded profile: its ``accelerator.targets`` and ``torch.version``."""
    return pending(
        lambda key: key_file(profile, key),
        profile.accelerator.targets if targets else (),
        profile.torch.version if torch else None,
    )


def pending_of_document(data: dict[str, Any], file_of: Callable[[str], str]) -> list[Pending]:
    """:func:`pending` of a merged profile document: the values that passed the loader's checks."""
    version = data.get("torch", {}).get("version")
    return pending(file_of, data.get("accelerator", {}).get("targets", ()), version)


def catalog_issues(catalog: Catalog, values: Sequence[Pending], *, hint: str = REFRESH_HINT) -> list[Issue]:
    """The problems only the catalog can see: an unknown card id in ``accelerator.targets``, a
    ``torch.version`` it does not know (``hint``: what else may know that torch release)."""
    found = []
    for value in values:
        if value.key.startswith("accelerator.targets") and catalog.card(value.value) is None:
            found.append(Issue(value.file, value.key, unknown_target(catalog, value.value)))
        elif value.key == "torch.version":
            version = value.value.partition("+")[0]
            if catalog.find_torch(version) is None:
                message = f"{unknown_torch(catalog, repr(value.value), version)}; {hint}"
                found.append(Issue(value.file, value.key, message))
    return found


MAX_MESSAGE = 800
MAX_KEY = 200


def clipped(issues: Sequence[Issue]) -> list[Issue]:
    """Issues short enough to print: a hostile multi-megabyte value must not flood the terminal."""

    def clip(text: str, limit: int) -> str:
        return text if len(text) <= limit else f"{text[: limit - 40]}... ({len(text)} characters in all)"

    return [Issue(i.file, clip(i.key, MAX_KEY), clip(i.message, MAX_MESSAGE)) for i in issues]
