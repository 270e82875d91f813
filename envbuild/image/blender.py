"""The official Blender tarball for ``envbuild fetch`` (``blender.source = "official"``), checked against
every sha256 known for it.

What the tarball must hash to, strongest first:

- the catalog's pin for the release (``[[tarball]]`` in ``blender.toml``, each with its source), where a
  published value was found;
- the bundle's lock (``blender_sha256``), recorded by the bundle's first fetch (:func:`record_sha256`):
  every later fetch, and any ``--blender-tarball``, must bring the same bytes;
- Blender's checksum list ``blender-X.Y.Z.sha256``, read beside the tarball.  It comes from the same
  place as the tarball, so it is an extra check only: with a pin (catalog or lock) it is read only from
  beside a ``--blender-tarball`` (never fetched from download.blender.org for that alone), and without
  it a checksum list is written from the pin for the Dockerfile's ``sha256sum -c``.  Without any pin it
  is required, as the only check there is, from beside the tarball or download.blender.org.

Values that disagree stop the fetch before any download; a tarball whose bytes differ is an error that
names the file, the expected and the actual sha256, and nothing of it is kept.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from envbuild import atomic
from envbuild.digest import sha256_file
from envbuild.errors import BuildError, UsageError
from envbuild.models import Lock, lock_json

if TYPE_CHECKING:
    from envbuild.catalog import Catalog

LOCK_FILE = "envbuild.lock.json"


@dataclass(frozen=True)
class BlenderFetched:
    tarball: str  # file name in the wheelhouse ("blender-4.5.3-linux-x64.tar.xz")
    checksums: str  # the checksum list beside it ("blender-4.5.3.sha256")
    sha256: str
    source: str  # where the tarball came from (URL or path)
    checksums_source: str  # where the list came from; "" when it was written from the pin
    downloaded: bool  # False: already in place with the expected sha256
    checked_against: tuple[str, ...] = ()  # what the sha256 was checked against, strongest first


def _is_url(value: str) -> bool:
    return re.match(r"^(https?|file)://", value) is not None


def _read_text(url: str) -> str:
    from envbuild.net import open_url

    with open_url(url) as handle:
        data: bytes = handle.read(1 << 20)
    return data.decode("utf-8", errors="replace")


def _published_sha256(text: str, name: str) -> str | None:
    for line in text.splitlines():
        m = re.match(r"^([0-9a-fA-F]{64})\s+\*?(\S+)\s*$", line)
        if m and m.group(2) == name:
            return m.group(1).lower()
    return None


def _pins(lock: Lock, catalog: Catalog, name: str) -> list[tuple[str, str]]:
    """(sha256, what says so) from the catalog's pin and the lock's record; they must agree."""
    pins: list[tuple[str, str]] = []
    row = catalog.blender.pinned(lock.blender_version or "")
    if row is not None:
        where = f"the catalog's pin (blender.toml [[tarball]] {row.version}: {row.source})"
        pins.append((row.sha256, where))
    if lock.blender_sha256:
        where = f"the bundle's {LOCK_FILE} (blender_sha256, recorded at its first fetch)"
        pins.append((lock.blender_sha256, where))
    if len(pins) == 2 and pins[0][0] != pins[1][0]:
        raise BuildError(
            f"fetch: {name}: {pins[0][1]} is sha256 {pins[0][0]}, but {pins[1][1]} is {pins[1][0]}; "
            "nothing was fetched. If the catalog is right, the lock recorded another file: render and lock "
            "the bundle again (a new lock records the fetched sha256 anew)"
        )
    return pins


def _sums_candidates(tarball: str | None, sums_name: str, sums_url: str, pinned: bool) -> list[str]:
    """Where Blender's checksum list is looked for, in order (see the module docstring)."""
    candidates = [] if pinned else [sums_url]
    if tarball is not None:
        if _is_url(tarball):
            candidates.insert(0, tarball.rsplit("/", 1)[0] + "/" + sums_name)
        else:
            beside = Path(tarball).resolve().parent / sums_name
            if beside.is_file():
                candidates.insert(0, beside.as_uri())
    return candidates


def fetch_blender(
    lock: Lock,
    dest: Path,
    tarball: str | None = None,
    say: Callable[[str], None] = lambda _: None,
    catalog: Catalog | None = None,
) -> BlenderFetched | None:
    """The official Blender tarball and its checksum list into ``dest`` (see the module docstring).

    None when the lock installs no official Blender (no Blender, or bpy from PyPI); ``tarball`` then is
    a usage error.  ``catalog`` defaults to :func:`envbuild.catalog.load_catalog`'s.
    """
    from envbuild.catalog import load_catalog
    from envbuild.net import download, redact_url

    if not lock.blender_version or lock.blender_source == "pypi":
        if tarball is not None:
            what = (
                'installs Blender as the bpy module (blender.source = "pypi"), a locked wheel'
                if lock.blender_version
                else "declares no Blender"
            )
            raise UsageError(f"--blender-tarball: the bundle's lock {what}; drop the option")
        return None
    catalog = catalog if catalog is not None else load_catalog()
    url, sums_url = catalog.blender_urls(lock.blender_version)
    name, sums_name = url.rsplit("/", 1)[-1], sums_url.rsplit("/", 1)[-1]
    source = url
    if tarball is not None and not _is_url(tarball):
        if not Path(tarball).is_file():
            raise UsageError(f"--blender-tarball {tarball}: no such file")
        source = Path(tarball).resolve().as_uri()
    elif tarball is not None:
        source = tarball
    checks = _pins(lock, catalog, name)
    tried: list[str] = []
    sums_text, sums_source = None, ""
    for candidate in _sums_candidates(tarball, sums_name, sums_url, bool(checks)):
        try:
            sums_text, sums_source = _read_text(candidate), candidate
            break
        except OSError as exc:
            tried.append(f"{redact_url(candidate)} ({exc})")
    if sums_text is None and not checks:
        raise BuildError(
            f"fetch: cannot read Blender {lock.blender_version}'s published checksums {sums_name}: tried "
            + "; ".join(tried)
            + f". Put {sums_name} (from {sums_url}) beside the tarball given to --blender-tarball"
        )
    if sums_text is not None:
        published = _published_sha256(sums_text, name)
        if published is None:
            raise BuildError(
                f"fetch: {redact_url(sums_source)} has no line for {name}; is it Blender's {sums_name}?"
            )
        checks.append((published, f"Blender's {sums_name} beside it ({redact_url(sums_source)})"))
        if published != checks[0][0]:
            raise BuildError(
                f"fetch: {name}: {checks[-1][1]} says sha256 {published}, but {checks[0][1]} is "
                f"{checks[0][0]}; nothing was fetched"
            )
    else:
        sums_text = f"{checks[0][0]}  {name}\n"  # for the Dockerfile's sha256sum -c
        say(f"no {sums_name} beside {redact_url(source)}: checking {name} against {checks[0][1]} only")
    expected, against = checks[0][0], tuple(where for _, where in checks)
    target = dest / name
    if target.is_file() and sha256_file(target) == expected:
        _write_sums(dest / sums_name, sums_text)
        say(f"{name} already in {dest} with the expected sha256")
        return BlenderFetched(name, sums_name, expected, source, sums_source, False, against)
    say(f"fetching Blender {lock.blender_version} ({name}) from {redact_url(source)}")
    digest = hashlib.sha256()
    try:
        download(source, target, update=digest.update)
    except OSError as exc:
        raise BuildError(
            f"fetch: cannot download {redact_url(source)}: {exc}; on a machine without internet, pass a copy "
            f"with --blender-tarball PATH"
        ) from None
    if digest.hexdigest() != expected:
        target.unlink(missing_ok=True)
        raise BuildError(
            f"fetch: {name} from {redact_url(source)} has sha256 {digest.hexdigest()}, but {checks[0][1]} "
            f"expects {expected}; nothing was kept"
        )
    _write_sums(dest / sums_name, sums_text)
    return BlenderFetched(name, sums_name, expected, source, sums_source, True, against)


def _write_sums(path: Path, text: str) -> None:
    atomic.write_text(path, text)


def record_sha256(bundle: Path, lock: Lock, sha256: str) -> Lock:
    """Record the fetched tarball's ``sha256`` in ``bundle``'s lock (written atomically); the lock as
    written.  A lock that already records it is left as it is."""
    if lock.blender_sha256 == sha256:
        return lock
    new = replace(lock, blender_sha256=sha256)
    try:
        atomic.write_text(bundle / LOCK_FILE, lock_json(new), mode=0o644)
    except OSError as exc:
        raise BuildError(
            f"fetch: cannot record Blender's sha256 in {bundle / LOCK_FILE}: {exc.strerror or exc}; the "
            "tarball is fetched and checked. Free space and run `envbuild fetch` again"
        ) from None
    return new
