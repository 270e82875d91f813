"""The CI workflow envbuild publishes (GitHub Actions): render, lock, fetch, build with its record,
validate in the image, rebuild without the cache and compare on content, publish junit.xml and records.

One template (``templates/ci/github-actions.yml.j2``) serves the bundle README (the bundle's profile
and targets) and ``docs/ci.md`` (:data:`DOC_PROFILES` x :data:`DOC_TARGETS`; regenerate with
``.venv/bin/python -m envbuild.render.ci > docs/ci.md``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from envbuild.templating import render_template

_CI_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
# Docker's reference grammar (distribution/reference): a path component is lowercase alphanumerics
# joined by one separator ("." , "_", "__" or a run of "-"); a tag is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
_ALNUM = re.compile(r"[a-z0-9]+")
_GOOD_SEPARATOR = re.compile(r"[._]|__|-+")
_TAG_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def ci_word(value: str) -> str:
    """A profile ref or target id for the workflow's matrix: a plain word, else a quoted YAML string."""
    return value if _CI_WORD.match(value) else json.dumps(value).replace("`", "\\u0060")


def image_component(name: str) -> str:
    """``name`` as one path component of a Docker repository: lowercase alphanumerics joined by the
    separators Docker accepts (``a..b`` -> ``a-b``; leading and trailing separators dropped), or
    ``envbuild`` when no alphanumeric is left."""
    text = name.lower()
    out: list[str] = []
    pos = 0
    for match in _ALNUM.finditer(text):
        if out:
            sep = text[pos : match.start()]
            out.append(sep if _GOOD_SEPARATOR.fullmatch(sep) else "-")
        out.append(match.group())
        pos = match.end()
    return "".join(out) or "envbuild"


def tag_word(value: str) -> str:
    """A card id as a Docker tag (``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}``)."""
    return _TAG_BAD.sub("-", value).lstrip(".-")[:128] or "target"


def workflow_ref(ref: str) -> str:
    """The profile as the workflow names it, from the checkout's root (the workflow runs in a checkout,
    never on the machine that rendered the bundle): a built-in name or a relative path as given; an
    absolute path relative to the git repository holding it, else its file name."""
    path = Path(ref)
    if not path.is_absolute():
        return ref
    root = next((folder for folder in path.parents if (folder / ".git").exists()), None)
    return path.relative_to(root).as_posix() if root is not None else path.name


@dataclass(frozen=True)
class CiProfile:
    ref: str  # the matrix's profile entry (a YAML word or quoted string)
    image: str  # the image name: one Docker repository path component


def ci_profile(ref: str, name: str) -> CiProfile:
    """The workflow's matrix entry for a profile ``ref`` (as the render command named it) named ``name``."""
    return CiProfile(ref=ci_word(workflow_ref(ref)), image=image_component(name))


DOC_PROFILES = ("pytorch-cpu", "ubuntu")
DOC_TARGETS = ("cpu",)

DOC_HEAD = """\
# Reproducible rebuilds in CI

`envbuild build` writes a build record beside its log (`build-<tag>.record.json`): the inputs (the
lock's sha256, the base image's id and layer DiffIDs, every wheel's sha256, the Debian packages with
version and architecture), the outputs (image id, layer DiffIDs, the Python distributions installed)
and a manifest of every file in the image (path, type, mode, uid, gid, size, sha256, link target; no
timestamps). It is computed from the `docker save` stream without holding a layer in memory.

- `envbuild rebuild BUNDLE --verify` rebuilds without the cache and compares with the bundle's record:
  exit 0 when equal on content, 1 when not, with each difference attributed to its Debian package or
  Python distribution.
- `envbuild image diff A B [--json]` compares any two images or records. Differences are classed as
  package versions, file content, or metadata only (mode, uid, gid). A short list of paths is noise by
  nature and is not compared; `envbuild.image.diff.NOISE` gives the reason for each.
- Every stage of the Dockerfile sets `SOURCE_DATE_EPOCH` (315532800, 1980-01-01), so pip's and Debian's
  byte-compilation write hash-based `.pyc` files; the apt step removes its indexes, logs, the ldconfig
  auxiliary cache and dpkg's backups. Two builds of one bundle then compare equal on content.
- Debian packages move with the archive. `envbuild render --apt-from build-<tag>.record.json` pins each
  unpinned package to the version a first build installed; `[system] snapshot = "YYYYMMDDTHHMMSSZ"` makes
  apt read snapshot.debian.org or snapshot.ubuntu.com as of that instant (`--build-arg
  APT_SNAPSHOT_MIRROR=URL` for a mirror of it). Sources the snapshot does not cover (the deadsnakes PPA,
  the CUDA or ROCm repository of a vendor base image) stay live, and `check` names them.
- A profile with `[python] build_from_source` builds those sdists in the image's builder stage.
  `envbuild build` keeps each built wheel in `BUNDLE/built-wheels/` with a key record (the sdist's
  sha256, torch's version and variant, the arch list, Python's and the compilers' versions); the next
  build copies in a wheel whose key matches, and whose sha256 the build record of the build that made it
  names, instead of compiling it (a wheel no record vouches for is left out and compiled again). The
  workflow caches that folder and the build records (the step runs only for a bundle that builds from
  source).

The workflow below runs these steps over a matrix of profiles x targets and publishes the validation
reports (junit.xml), the build records and the comparison. The bundle README carries the same workflow
for its own profile and targets. Regenerate this page with
`.venv/bin/python -m envbuild.render.ci > docs/ci.md`.

```yaml
"""


def workflow(profiles: tuple[CiProfile, ...], targets: tuple[str, ...], *, built_cache: bool = False) -> str:
    """The workflow; ``built_cache``: with the step that keeps wheels built from source between runs
    (a bundle whose profile has ``[python] build_from_source``, and the docs page)."""
    return render_template(
        "ci/github-actions.yml.j2",
        ci_profiles=profiles,
        ci_targets=tuple(ci_word(tag_word(t)) for t in targets),
        ci_built_cache=built_cache,
    )


def doc_page() -> str:
    profiles = tuple(ci_profile(p, p) for p in DOC_PROFILES)
    return DOC_HEAD + workflow(profiles, DOC_TARGETS, built_cache=True) + "```\n"


if __name__ == "__main__":
    print(doc_page(), end="")
