"""pip requirement files and ``python.packages`` strings -> :class:`~envbuild.models.RequirementLine`.

Follows pip's own reading of a requirements file (``pip._internal.req.req_file``): lines ending in
``\\`` are joined (a comment line never continues), ``#`` starts a comment at the start of a line or
after whitespace (so ``...whl#sha256=...`` survives), blank lines are skipped, tokens before the first
``-`` option are the requirement and the rest are its per-requirement options.

What comes out (in file order):

* ``requirement``: PEP 508 text normalised by :mod:`packaging` (``name[extras] specifiers; markers``
  or ``name @ url``), the canonical name, and the ``--hash`` values in ``hashes`` (``sha256:<hex>``),
  *not* in ``text``: a writer appends ``--hash=...`` for each.  Bare URLs (``https://.../x.whl``,
  ``git+https://...#egg=name``) become ``name @ url``.
* ``option``: each global option, normalised to its long form (``--index-url URL``, ``--pre``,
  ``--only-binary :all:``, ``-c constraints.txt`` ...).  A constraints file must exist inside the
  profile's folder; it is read and hashed with the profile.
* ``--find-links`` must be an http(s) URL: a local folder is not in the image's build context, and
  pip would silently skip it there (envbuild's own wheelhouse is the supported way to build offline).
* A file named ``pylock.toml`` / ``pylock.<name>.toml`` is read as a PEP 751 lock
  (:mod:`envbuild.profile.pylock`): each package becomes a pinned line with its hashes.
* ``include``: ``-r other.txt`` (relative to the including file, inside the profile's folder, cycles
  rejected), followed by the included file's own lines.  Includes are bounded
  (:mod:`envbuild.profile.includes`: 256 inclusions and 100,000 lines in all, each inclusion counted),
  and each distinct file is read and parsed once.
* A ``-c`` constraints file is read with the same rules (pip reads it at build time), its lines are
  not installed, and it may not name further ``-r``/``-c`` files (envbuild copies it alone, without its
  comments).  It is copied into the bundle, so a secret on any of its lines, a comment's too, is refused.
* Decoding follows pip: a UTF-8/16/32 BOM, else a ``# -*- coding: NAME -*-`` line, else UTF-8 (pip's
  locale fallback is not followed: it would read differently on another machine).
* Comment stripping and every scan run in linear time: a hostile multi-megabyte line is refused
  quickly, with a clipped message.

Rejected, each with the reason: ``-e``/``--editable`` (an editable checkout is not reproducible in an
image: use ``name @ git+https://...@rev``), local paths and ``file:`` URLs (they are not in the build
context), ``${VAR}`` references (pip would expand them from the build environment: a way to bake
secrets into an image; provide credentials at run time), URLs carrying credentials, unknown options,
``-r``/``-c`` URLs (download the file into the profile's folder so its bytes are hashed), a requirement
after an option on the same line (pip silently drops it), and requirement text that would not read back
unchanged from the file envbuild writes (`` #``, `` -``, a trailing ``\\``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from envbuild.errors import Issue
from envbuild.models import RequirementLine
from envbuild.profile.fields import has_control
from envbuild.profile.includes import Budget, Frame, OverBudget, Parsed
from envbuild.profile.paths import Place, PlaceError
from envbuild.profile.pep508 import (
    ENV_VAR_MSG,
    ENV_VAR_RE,
    SCHEME_RE,
    LineError,
    check_url,
    parse_requirement,
)
from envbuild.profile.pylock import is_pylock, parse_pylock
from envbuild.profile.reqtext import decode, logical_lines
from envbuild.secrets import content_reason, redact

MAX_INCLUDE_DEPTH = 16
_HASH_RE = {"sha256": 64, "sha384": 96, "sha512": 128}
_HOST_RE = re.compile(r"[A-Za-z0-9.-]+(?::[0-9]+)?|\[[0-9a-fA-F:]+\](?::[0-9]+)?")
_BINARY_RE = re.compile(r":all:|:none:|[A-Za-z0-9._-]+(?:,[A-Za-z0-9._-]+)*")

# long option -> takes a value?  Short aliases map onto long ones.
_OPTIONS: dict[str, bool] = {
    "--index-url": True,
    "--extra-index-url": True,
    "--no-index": False,
    "--find-links": True,
    "--pre": False,
    "--trusted-host": True,
    "--prefer-binary": False,
    "--only-binary": True,
    "--no-binary": True,
    "--constraint": True,
    "--requirement": True,
    "--editable": True,
    "--require-hashes": False,
    "--use-feature": True,
}
_SHORT = {
    "-i": "--index-url",
    "-f": "--find-links",
    "-c": "--constraint",
    "-r": "--requirement",
    "-e": "--editable",
}
_PER_REQUIREMENT = ("--hash", "--config-settings", "--global-option", "--install-option")
SUPPORTED_OPTIONS = ", ".join([*sorted(_OPTIONS), *sorted(_SHORT), "--hash (per requirement)"])
EDITABLE_MSG = (
    "-e/--editable is not supported: an editable checkout is not reproducible in an image; "
    "use 'name @ git+https://host/repo@REV' or a published version"
)


@dataclass
class _State:
    issues: list[Issue]
    key: str  # "python.requirements[0]"
    on_file: Callable[[Place, bytes], None]
    budget: Budget = field(default_factory=Budget)
    stack: list[str] = field(default_factory=list)
    lines: list[RequirementLine] = field(default_factory=list)
    constraints: bool = False  # reading a -c file: checked, its lines are not installed
    frames: list[Frame] = field(default_factory=list)  # one per file being read (the stack's)


def _split_options(options: str) -> list[tuple[str, str | None]]:
    import shlex  # with an option only

    try:
        tokens = shlex.split(options)
    except ValueError as exc:
        raise LineError(f"cannot split options: {exc}") from None
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        name, eq, value = token.partition("=") if token.startswith("--") else (token, "", "")
        if not token.startswith("-"):
            raise LineError(
                f"{token!r} follows an option on the same line, where pip silently ignores it: "
                "put each requirement on its own line"
            )
        if not token.startswith("--") and token[:2] in _SHORT:
            name, value, eq = _SHORT[token[:2]], token[2:], "=" if len(token) > 2 else ""
        if name.startswith("--") and name not in _OPTIONS and name not in _PER_REQUIREMENT:
            # optparse (and so pip) accepts any unambiguous prefix of a long option
            matches = [o for o in (*_OPTIONS, *_PER_REQUIREMENT) if o.startswith(name)]
            name = matches[0] if len(matches) == 1 and len(name) > 2 else name
        takes_value = _OPTIONS.get(name, name in _PER_REQUIREMENT)
        if name not in _OPTIONS and name not in _PER_REQUIREMENT:
            raise LineError(f"unknown option {token!r}; supported: {SUPPORTED_OPTIONS}")
        if takes_value and not eq:
            if i >= len(tokens):
                raise LineError(f"option {name} needs a value")
            value = tokens[i]
            i += 1
        elif not takes_value and eq:
            raise LineError(f"option {name} takes no value")
        out.append((name, value if takes_value else None))
    return out


def _option_line(name: str, value: str | None, place: Place, state: _State, origin: str) -> None:
    import shlex  # with an option only

    if name == "--editable":
        raise LineError(EDITABLE_MSG)
    if value is None:
        state.lines.append(RequirementLine(kind="option", text=name, origin=origin))
        return
    if has_control(value) or not value:
        raise LineError(f"option {name} has an empty value or control characters")
    if name in ("--index-url", "--extra-index-url"):
        if not value.startswith(("https://", "http://")):
            raise LineError(f"{name} must be an http(s) URL, got {value!r}")
        check_url(value)
    elif name == "--find-links":
        if not value.lower().startswith(("https://", "http://")):
            raise LineError(
                f"--find-links {value!r}: a local folder or non-http location is not in the image's build "
                "context (pip would silently skip it there); put the wheels in the bundle's wheelhouse/ "
                "or use an https:// URL"
            )
        check_url(value)
    elif name == "--trusted-host":
        if not _HOST_RE.fullmatch(value):
            raise LineError(f"--trusted-host {value!r} is not a host[:port]")
    elif name in ("--only-binary", "--no-binary"):
        if not _BINARY_RE.fullmatch(value):
            raise LineError(f"{name} takes :all:, :none: or comma-separated project names, got {value!r}")
    elif name == "--use-feature":
        if not re.fullmatch(r"[a-z0-9-]+", value):
            raise LineError(f"--use-feature {value!r} is not a feature name")
    elif name in ("--requirement", "--constraint"):
        if SCHEME_RE.match(value):
            raise LineError(f"{name} {value!r}: download the file into the profile's folder so it is hashed")
        try:
            target = place.child(value)
        except PlaceError as exc:
            raise LineError(f"{name}: {exc}") from None
        if state.constraints:
            raise LineError(
                f"{name} inside a constraints file is not supported: envbuild copies a constraints file "
                "into the bundle on its own; put its lines in that one file"
            )
        short = "-r" if name == "--requirement" else "-c"
        if name == "--constraint":
            # pip reads the file at build time: check it like a requirements file (no ${VAR}, no
            # credentials, no -e, no local paths), keep only the option line
            _include(target, replace(state, lines=[], constraints=True), origin)
            state.lines.append(RequirementLine(kind="option", text=f"-c {shlex.quote(value)}", origin=origin))
            return
        state.lines.append(
            RequirementLine(kind="include", text=f"{short} {shlex.quote(value)}", origin=origin)
        )
        _include(target, state, origin)
        return
    state.lines.append(RequirementLine(kind="option", text=f"{name} {shlex.quote(value)}", origin=origin))


def _requirement_line(args: str, options: str, origin: str, state: _State) -> None:
    text, name = parse_requirement(args)
    hashes: list[str] = []
    for opt, value in _split_options(options):
        if opt != "--hash":
            if opt in _PER_REQUIREMENT:
                raise LineError(f"per-requirement option {opt} is not supported (only --hash)")
            raise LineError(f"option {opt} must be on its own line, not after a requirement")
        algo, _, digest = (value or "").partition(":")
        if algo not in _HASH_RE or len(digest) != _HASH_RE[algo] or not re.fullmatch(r"[0-9a-fA-F]+", digest):
            raise LineError(f"--hash={value} is not ALGO:HEX with ALGO one of {', '.join(_HASH_RE)}")
        normal = f"{algo}:{digest.lower()}"
        if normal not in hashes:
            hashes.append(normal)
    state.lines.append(
        RequirementLine(kind="requirement", text=text, name=name, hashes=tuple(hashes), origin=origin)
    )


def _include(place: Place, state: _State, origin: str) -> None:
    """Read the file ``-r``/``-c`` names at ``origin``: each distinct file is parsed once, and every
    inclusion is charged to the budget, its own and, for a file parsed before, those inside it."""
    budget, where = state.budget, f"{origin}, which includes {place.display}"
    key = (place.path.resolve(), state.constraints)
    done = budget.parsed.get(key)
    if done is None:
        before = (budget.inclusions, budget.physical, len(state.lines))
        budget.charge(1, 0, where)
        frame = _parse_file(place, state)
        done = budget.parsed[key] = Parsed(
            lines=tuple(state.lines[before[2] :]),
            inclusions=budget.inclusions - before[0],
            physical=budget.physical - before[1],
            files=frozenset(frame.files),
            depth=frame.depth,
        )
    else:
        cycle = next((label for label in state.stack if label in done.files), None)
        if cycle is not None:
            raise LineError(f"-r include cycle: {' -> '.join([*state.stack, place.label])} -> ... -> {cycle}")
        if len(state.stack) + done.depth >= MAX_INCLUDE_DEPTH:
            raise LineError(f"-r includes nest deeper than {MAX_INCLUDE_DEPTH}")
        budget.charge(done.inclusions, done.physical, where)
        state.lines.extend(done.lines)
    if state.frames:
        state.frames[-1].files |= done.files
        state.frames[-1].depth = max(state.frames[-1].depth, done.depth + 1)


def _parse_file(place: Place, state: _State) -> Frame:
    """Parse ``place`` into ``state``; return the files it read and how deep its includes nest."""
    if place.label in state.stack:
        chain = " -> ".join([*state.stack, place.label])
        raise LineError(f"-r include cycle: {chain}")
    if len(state.stack) >= MAX_INCLUDE_DEPTH:
        raise LineError(f"-r includes nest deeper than {MAX_INCLUDE_DEPTH}")
    try:
        data = place.read()
        text = decode(data)
    except (PlaceError, LineError) as exc:
        state.issues.append(Issue(place.display, state.key, str(exc)))
        return Frame({place.label})
    state.on_file(place, data)
    physical = text.splitlines()
    state.budget.charge(0, len(physical), place.display)
    frame, first_issue = Frame({place.label}), len(state.issues)
    if is_pylock(place.label) and not state.constraints:
        for key, item in parse_pylock(text, place.label):
            if isinstance(item, LineError):
                state.issues.append(Issue(place.display, f"{state.key} {key}".strip(), str(item)))
            else:
                state.lines.append(item)
        return frame
    state.stack.append(place.label)
    state.frames.append(frame)
    try:
        for number, line in logical_lines(text):
            origin = f"{place.label}:{number}"
            try:
                if ENV_VAR_RE.search(line):
                    raise LineError(ENV_VAR_MSG)
                tokens = line.split(" ")
                split = next((i for i, tok in enumerate(tokens) if tok.startswith("-")), len(tokens))
                args, options = " ".join(tokens[:split]).strip(), " ".join(tokens[split:])
                if args:
                    _requirement_line(args, options, origin, state)
                else:
                    for name, value in _split_options(options):
                        if name in _PER_REQUIREMENT:
                            raise LineError(f"{name} must follow a requirement on the same logical line")
                        _option_line(name, value, place, state, origin)
            except LineError as exc:
                state.issues.append(Issue(place.display, f"{state.key} line {number}", str(exc)))
    finally:
        state.stack.pop()
        state.frames.pop()
    if state.constraints:  # copied into the bundle: no secret anywhere, comments included
        _secret_lines(place, state, physical, {issue.key for issue in state.issues[first_issue:]})
    return frame


def _secret_lines(place: Place, state: _State, physical: list[str], reported: set[str]) -> None:
    """A constraints file is copied into the bundle (and so the image): a secret on any line, in a
    comment too, is refused here, named by its line and shown redacted (``reported``: the keys of the
    lines the parse refused already)."""
    for number, line in enumerate(physical, start=1):
        if f"{state.key} line {number}" in reported:
            continue
        found = content_reason(line.encode("utf-8", "replace"))
        if found:
            shown = redact(line.strip())  # redacted first, then cut
            shown = shown if len(shown) <= 120 else shown[:117] + "..."
            state.issues.append(
                Issue(
                    place.display,
                    f"{state.key} line {number}",
                    f"holds {found} ({shown}); a constraints file is copied into the bundle and the image: "
                    "remove the secret (pip reads index credentials from the environment or a keyring at "
                    "build time)",
                )
            )


def parse_file(
    place: Place,
    *,
    key: str,
    issues: list[Issue],
    on_file: Callable[[Place, bytes], None],
    constraints: bool = False,
) -> tuple[RequirementLine, ...]:
    """Parse a requirements file (and its ``-r`` includes); append problems to ``issues``.

    Includes are bounded: :data:`MAX_INCLUSIONS` inclusions and :data:`MAX_INCLUDED_LINES` lines in all,
    each inclusion counted every time it happens; each distinct file is read and parsed once.  With
    ``constraints``, the file is read as a ``-c`` file (checked, secrets refused; its lines returned)."""
    state = _State(issues=issues, key=key, on_file=on_file, constraints=constraints)
    try:
        _parse_file(place, state)
    except OverBudget as exc:
        issues.append(Issue(place.display, key, str(exc)))
        return ()
    return tuple(state.lines)


def parse_packages(
    packages: tuple[str, ...], *, file: str, issues: list[Issue], first_index: int = 0
) -> tuple[RequirementLine, ...]:
    """``python.packages`` entries; origin ``profile:python.packages[i]``."""
    lines: list[RequirementLine] = []
    for i, entry in enumerate(packages, start=first_index):
        key = f"python.packages[{i}]"
        try:
            text, name = parse_requirement(entry)
        except LineError as exc:
            issues.append(Issue(file, key, str(exc)))
            continue
        lines.append(RequirementLine(kind="requirement", text=text, name=name, origin=f"profile:{key}"))
    return tuple(lines)
