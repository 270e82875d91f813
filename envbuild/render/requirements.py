"""``requirements-rebuild.txt``: written line by line, in a fixed order, always parsable by pip.

Order (documented in the file header too):

1. header comments: envbuild version, the command that regenerates the file, the profile and its
   sha256, every index URL with the reason it is there;
2. index options: the plan's primary ``--index-url`` then its ``--extra-index-url`` s, then the
   user's global options in declared order.  A user's ``--index-url`` becomes an
   ``--extra-index-url`` so the torch index that carries the exact variant stays primary;
3. the torch-family pins, exact and with the local variant tag (``torch==2.7.1+cu128``);
4. the user's requirements in *declared* order (``python.packages`` first, then each
   ``python.requirements`` file, ``-r`` includes expanded where they appear), each with its
   ``--hash`` options attached and its origin as a comment on the line above.

A ``-c`` constraints file is copied into the bundle (``constraints/``) and the line points at the
copy.  Options that cannot work inside the image are kept as comments so nothing is dropped
silently.  Hash-checking mode: when any requirement carries ``--hash`` pip demands hashes for every
requirement, and the torch-family pins have none until ``envbuild lock`` rewrites this file with every
distribution hashed; the header says so.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator

from envbuild import __version__
from envbuild.models import Plan, RequirementLine
from envbuild.render.constraints import Constraint, collect_constraints, constraint_value
from envbuild.render.quote import check_file, check_plain, comment

FILENAME = "requirements-rebuild.txt"

# Options pip accepts in a requirements file that apply to the whole install.
GLOBAL_OPTIONS = frozenset(
    {
        "-i",
        "--index-url",
        "--extra-index-url",
        "--no-index",
        "-f",
        "--find-links",
        "--pre",
        "--prefer-binary",
        "--only-binary",
        "--no-binary",
        "--trusted-host",
        "--use-feature",
        "--require-hashes",
    }
)
INDEX_URL_OPTIONS = frozenset({"-i", "--index-url"})
INDEX_OPTIONS = INDEX_URL_OPTIONS | {"--extra-index-url"}


def option_words(line: RequirementLine) -> list[str]:
    """An option line's words, ``--name=value`` split into ``--name value`` ([] when it does not split)."""
    try:
        words = shlex.split(line.text, comments=False, posix=True)
    except ValueError:
        return []
    if words and "=" in words[0] and words[0].startswith("--"):
        name, _, value = words[0].partition("=")
        words = [name, value, *words[1:]]
    return words


def requirement_text(line: RequirementLine) -> str:
    """The requirement with its hashes attached (``name==1.0 --hash=sha256:...``)."""
    text = check_plain(line.text, line.origin)
    hashes = [h if h.startswith("--hash=") else f"--hash={h}" for h in line.hashes]
    missing = [h for h in hashes if h not in text]
    return " ".join([text, *missing])


def generate(plan: Plan, command: str, constraints: tuple[Constraint, ...] | None = None) -> Iterator[str]:
    """Yield the lines of ``requirements-rebuild.txt`` (without line terminators)."""
    profile = plan.profile
    copies = {c.origin: c for c in (collect_constraints(plan) if constraints is None else constraints)}
    hashed = [line for line in plan.requirements if line.hashes]
    yield f"# requirements-rebuild.txt, written by envbuild {__version__}. Do not edit: regenerate with"
    yield f"#   {comment(command, 'command')}"
    yield f"# profile: {comment(profile.name, 'name')} ({comment(profile.path, 'path')})"
    yield f"# profile sha256: {profile.sha256}"
    if plan.torch_version:
        yield f"# torch {plan.torch_version}, variant {plan.torch_variant}, backend {plan.backend}"
    for index in plan.index_urls:
        role = "index" if index.primary else "extra index"
        yield f"# {role} {comment(index.url, 'index url')}: {comment(index.reason, 'index reason')}"
    yield "# Order: index options, torch-family pins (exact, with the variant tag), then the profile's"
    yield "# requirements in declared order (python.packages, then each requirements file)."
    if hashed and plan.pins:
        yield f"# Note: {len(hashed)} requirement(s) carry --hash, which puts pip in hash-checking mode; the"
        yield "# torch-family pins carry no hash yet: `envbuild lock` hashes every line (fetch and build"
        yield "# lock the bundle first)."
    yield ""

    primary = [i for i in plan.index_urls if i.primary]
    extras = [i for i in plan.index_urls if not i.primary]
    for index in primary[:1]:
        yield f"--index-url {check_plain(index.url, 'index url')}"
    for index in primary[1:] + extras:
        yield f"--extra-index-url {check_plain(index.url, 'index url')}"

    kept: list[RequirementLine] = []
    indexes = {index.url for index in plan.index_urls}
    for line in plan.requirements:
        if line.kind == "requirement":
            kept.append(line)
            continue
        check_plain(line.text, line.origin)  # shlex.join below would quote a line break, not refuse it
        words = option_words(line) if line.kind == "option" else []
        origin = comment(line.origin, "origin")
        if line.kind == "include":
            yield f"# {origin}: {comment(line.text, origin)} (expanded: its lines follow in declared order)"
        elif len(words) == 2 and words[0] in INDEX_OPTIONS and words[1] in indexes:
            yield f"# {origin}: {comment(line.text, origin)} (already listed above)"
        elif line.origin in copies and constraint_value(line) is not None:
            copy = copies[line.origin]
            yield f"# {origin}: -c {comment(copy.declared, origin)} (copied into the bundle)"
            yield shlex.join(["--constraint", copy.bundle_path])
        elif words and words[0] in INDEX_URL_OPTIONS and primary:
            note = "kept as an extra index: the torch index stays primary"
            yield f"# {origin}: {comment(line.text, origin)} ({note})"
            yield shlex.join(["--extra-index-url", *words[1:]])
        elif words and words[0] in GLOBAL_OPTIONS:
            yield f"# {origin}"
            yield shlex.join(words)
        else:
            yield f"# {origin}: {comment(line.text, origin)} (not carried into the image)"

    if plan.pins:
        yield ""
        yield "# torch family: exact pins with the local variant tag, so no other variant can win"
    for pin in plan.pins:
        yield f"{pin.spec}  # {comment(pin.reason, 'pin reason')}"

    if kept:
        yield ""
        yield "# the profile's requirements, in declared order"
    for line in kept:
        yield f"# {comment(line.origin, 'origin')}"
        yield requirement_text(line)


def render_requirements(plan: Plan, command: str, constraints: tuple[Constraint, ...] | None = None) -> str:
    lines = list(generate(plan, command, constraints))
    return check_file(FILENAME, "\n".join(lines).rstrip("\n") + "\n", lines)
