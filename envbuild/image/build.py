"""``envbuild build``: build a bundle into an image with the classic builder, through the docker SDK.

The context is assembled deterministically (:mod:`envbuild.image.context`) into a temporary file and
streamed to the engine; progress is shown live; the full log is saved beside the bundle as
``build-<tag>.log``.  A failure names the failing step, shows the tail of its output and raises
:class:`BuildError` (exit 1).  An engine that stops mid-build (the stream breaks off and a ping gets
no answer) raises :class:`EngineUnavailable` (exit 3) naming the step it stopped in, which is also the
log's last line; the tag is not moved (the classic builder tags only a finished image, and envbuild
tags nothing itself).  Nothing secret is ever passed as a build argument: the only ones are
``BASE_IMAGE`` and ``FINAL_CA=envbuild-ca`` (``--keep-ca-cert``: the final image keeps the
``--ca-cert`` certificates, which otherwise trust apt and pip in the build stages only).  The context
is re-checked for secrets before the engine sees it (:func:`envbuild.image.context.check_context`).
"""

from __future__ import annotations

import errno
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envbuild.errors import BuildError, BundleError, EngineUnavailable
from envbuild.image.built_cache import builder_stage_image, verify_built
from envbuild.image.certs import CaCert, load_ca_certs
from envbuild.image.context import ContextInfo, write_context
from envbuild.image.engine import HOW_TO_START, api_client, engine_address, engine_answers
from envbuild.image.progress import BuildStream, Step, rich_progress
from envbuild.image.refs import check_image_ref, check_network, check_tag, slug
from envbuild.image.wheelhouse import verify_wheelhouse
from envbuild.models import Lock, check_bundle

SPOOL_BYTES = 64 << 20
FINAL_CA_STAGE = "AS envbuild-final-ca"  # in a Dockerfile whose final stage can leave certs/ out


@dataclass(frozen=True)
class StepTime:
    number: int
    instruction: str
    seconds: float
    cached: bool


@dataclass(frozen=True)
class BuildResult:
    tag: str
    image_id: str
    seconds: float
    log: Path
    context: ContextInfo
    steps: tuple[StepTime, ...]
    builder_image: str | None = None  # the builder stage's last image (the built wheels' export reads it)
    built_notes: tuple[
        str, ...
    ] = ()  # kept built wheels left out of the context (no build record names them)

    @property
    def cached_steps(self) -> int:
        return sum(s.cached for s in self.steps)


def build_args(base_image: str | None, keep_ca_cert: bool, dockerfile: str = "") -> dict[str, str]:
    args = {"BASE_IMAGE": base_image} if base_image else {}
    if "\nARG MAX_JOBS=" in dockerfile:  # a source build ([python] build_from_source): sized to this machine
        from envbuild.render.source_build import build_machine_jobs

        args["MAX_JOBS"] = str(build_machine_jobs())
    if keep_ca_cert:
        args["FINAL_CA"] = "envbuild-ca"  # the stage that holds certs/ (templates/dockerfiles/Dockerfile.j2)
    return args


def log_path_for(bundle: Path, tag: str) -> Path:
    return bundle / f"build-{slug(tag)}.log"


def check_build_args(
    tag: str, base_image: str | None, network: str | None, ca_certs: tuple[Path, ...]
) -> tuple[CaCert, ...]:
    """Refuse a bad --tag/--base-image/--network/--ca-cert (exit 2); return the certificates read."""
    check_tag(tag)
    if base_image is not None:
        check_image_ref(base_image, "--base-image")
    if network is not None:
        check_network(network)
    return load_ca_certs(tuple(ca_certs))


def check_locked(bundle: Path, lock: Lock, house: Path) -> None:
    """Refuse (exit 2, before any engine) a bundle that would install anything unhashed or online.

    An unlocked bundle (``"resolved": false``): its requirements carry no hashes.  A locked one with an
    empty wheelhouse installs from the indexes inside the image, which cannot work when a locked file
    came from a local ``--find-links`` folder (it is on no index) or the indexes need credentials
    (never passed into a build)."""
    from envbuild.lock.urls import install_route

    if not lock.resolved:
        raise BundleError(
            f"{bundle}: not locked, so its requirements carry no hashes and the build would install "
            f"unchecked files; run `envbuild lock {bundle}` (then `envbuild fetch {bundle}` to build "
            "offline), or pass --fetch, which locks first"
        )
    if any(house.glob("*.whl")):
        return
    route = install_route(lock)
    if route.wheelhouse:
        raise BundleError(
            f"{house}: empty, and {len(route.local)} locked distribution(s) came from a local --find-links "
            f"folder, on no index ({', '.join(route.local[:4])}{' ...' if len(route.local) > 4 else ''}); "
            f"run `envbuild fetch {bundle} --find-links DIR` first"
        )
    if route.variables:
        raise BundleError(
            f"{house}: empty, and the lock's indexes need credentials ({', '.join(route.variables)}), which "
            f"never enter a build; run `envbuild fetch {bundle}` with them set first"
        )


def build_image(
    bundle: Path,
    tag: str,
    *,
    base_image: str | None = None,
    wheelhouse: Path | None = None,
    ca_certs: tuple[Path, ...] = (),
    network: str | None = None,
    no_cache: bool = False,
    progress: bool = True,
    client: Any = None,
    wheels_checked: bool = False,
    keep_ca_cert: bool = False,
) -> BuildResult:
    """Build ``bundle`` as ``tag``; return what was built or raise :class:`BuildError`.

    An unlocked bundle is refused (:func:`check_locked`).  The wheelhouse is checked against the lock
    before the engine is used, unless ``wheels_checked`` says the caller just did (the CLI checks before
    it contacts the engine, or fetched them itself)."""
    certs = check_build_args(tag, base_image, network, ca_certs)
    lock = check_bundle(bundle)
    if (
        certs
        and not keep_ca_cert
        and FINAL_CA_STAGE not in (bundle / "Dockerfile").read_text(encoding="utf-8")
    ):
        raise BundleError(
            f"{bundle / 'Dockerfile'}: rendered before the final image could leave --ca-cert out; "
            "re-render the bundle (`envbuild render`), or pass --keep-ca-cert to keep the CA in the image"
        )
    dockerfile = (bundle / "Dockerfile").read_text(encoding="utf-8")
    house = wheelhouse if wheelhouse is not None else bundle / "wheelhouse"
    check_locked(bundle, lock, house)
    if not wheels_checked:
        verify_wheelhouse(lock, house)
    built = verify_built(lock, bundle)  # built-wheels/: each kept wheel, vouched for by a build record
    api = client if client is not None else api_client()
    log_path = log_path_for(bundle, tag)
    started = time.monotonic()
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as context_file:
        try:
            info = write_context(
                bundle,
                context_file,
                wheelhouse=wheelhouse,
                ca_certs=certs,
                leave_out=frozenset(built.left_out),
                expect_sha256=built.sha256,
            )
        except OSError as exc:
            if not _disk_full(exc):
                raise
            raise BundleError(
                f"{tempfile.gettempdir()}: cannot hold the build context (over {SPOOL_BYTES >> 20} MiB, "
                f"spooled to a temporary file): {exc.strerror}; free space there or point TMPDIR elsewhere"
            ) from None
        context_file.seek(0)
        # Written as the build goes (tail -f works); an interrupted build says so in its last line.
        try:
            log_file = log_path.open("w", encoding="utf-8", buffering=1)  # line by line: tail -f, no loss
        except OSError as exc:
            raise BundleError(f"{log_path}: cannot write the build log: {exc.strerror or exc}") from None
        asked = False  # whether the engine was asked to build
        try:
            with log_file as log:
                log.write(f"# envbuild build {bundle} --tag {tag}\n")
                log.write(f"# context: {info.files} files, {info.bytes} bytes, sha256 {info.sha256}\n")
                kept = (
                    " (kept in the final image)" if keep_ca_cert else " (build stages only)" if certs else ""
                )
                wheels = f"# wheels: {info.wheels}, tool wheels: {info.tools}, extra CA certs: {len(certs)}"
                log.write(f"{wheels}{kept}\n")
                for note in built.notes:
                    log.write(f"# {note}\n")
                stream = BuildStream(log)
                kwargs: dict[str, Any] = {
                    "fileobj": context_file,
                    "custom_context": True,
                    "tag": tag,
                    "decode": True,
                    "rm": True,
                    "forcerm": True,
                    "nocache": no_cache,
                    "buildargs": build_args(base_image, keep_ca_cert, dockerfile) or None,
                    "network_mode": network,
                }
                broke: Exception | None = None
                asked = True
                try:
                    with rich_progress(stream, f"building {tag}", enabled=progress) as refresh:
                        for chunk in api.build(**kwargs):
                            if isinstance(chunk, dict):
                                stream.feed(chunk)
                                refresh()
                        stream.close()
                        refresh()
                except Exception as exc:  # docker.errors.APIError, requests errors: the engine may be gone
                    if _disk_full(exc):  # writing the log, not the engine
                        raise
                    broke = exc
                except KeyboardInterrupt:
                    log.write("INTERRUPTED: the build was stopped by the user\n")
                    raise
                if (broke is not None or stream.image_id is None) and not engine_answers(api):
                    # The stream broke off and the engine no longer answers: it stopped (killed, crashed,
                    # restarted) mid-build.  The classic builder tags only a finished image, so ``tag`` was
                    # not moved.  The log's last line says where the build was.
                    where = _where_stopped(stream)
                    if broke is not None:
                        log.write(
                            f"ERROR: the build stream broke off: {type(broke).__name__}: {_short(broke)}\n"
                        )
                    log.write(f"ENGINE STOPPED: the Docker engine stopped answering {where}\n")
                    raise EngineUnavailable(_engine_stopped_message(tag, where, broke, log_path))
                if broke is not None:
                    stream.error = stream.error or f"the engine failed during the build: {broke}"
                    log.write(f"ERROR: {stream.error}\n")
        except OSError as exc:
            if not _disk_full(exc):
                raise
            done = (
                "envbuild stopped following the build (the engine may still finish it)"
                if asked
                else "the engine was not asked to build anything"
            )
            raise BundleError(
                f"{log_path}: cannot write the build log: {exc.strerror}; {done}. Free space and build again"
            ) from None
    seconds = time.monotonic() - started
    if stream.error is not None or stream.image_id is None:
        raise BuildError(_failure_message(stream, log_path))
    steps = tuple(StepTime(s.number, s.instruction, round(s.seconds, 3), s.cached) for s in stream.steps)
    builder = builder_stage_image(stream.steps)
    return BuildResult(tag, stream.image_id, seconds, log_path, info, steps, builder, built.notes)


DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _disk_full(exc: BaseException) -> bool:
    """A write that failed for want of room (requests' and docker's errors are OSErrors without errno)."""
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def _where_stopped(stream: BuildStream) -> str:
    step = stream.current
    if step is None:
        return f"before the first step ({stream.clock() - stream.started:.0f} s into the build)"
    return f"during step {step.number}/{step.total}: {step.instruction} ({step.seconds:.0f} s into that step)"


def _engine_stopped_message(tag: str, where: str, broke: Exception | None, log_path: Path) -> str:
    cause = (
        f"; the build stream broke off ({type(broke).__name__})"
        if broke is not None
        else "; the build stream ended without a result"
    )
    return (
        f"the Docker engine at {engine_address()} stopped answering {where}{cause}.\n"
        f"{tag} was not tagged: the engine tags an image only when its build finishes, so the tag names "
        "what it named before, if anything.\n"
        f"full log: {log_path}\n"
        f"Once the engine is back, run the same `envbuild build` again (finished steps come from the "
        f"cache).\n{HOW_TO_START}"
    )


def _short(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:200]


def _failure_message(stream: BuildStream, log_path: Path) -> str:
    step: Step | None = stream.failing_step()
    error = stream.error or "the build stream ended without an image id"
    if step is None:
        return f"build failed before any step ran: {error}\nfull log: {log_path}"
    tail = "\n".join(f"  | {line}" for line in stream.tail(step))
    hint = first_compiler_error(step.lines)
    if step.instruction.upper().startswith("FROM "):
        hint += (
            "hint: the base image is neither here nor pullable; without a registry, build a local one "
            "(scripts/base-image.sh makes envbuild/debian:12) and pass it with --base-image\n"
        )
    return (
        f"build failed at step {step.number}/{step.total}: {step.instruction}\n"
        f"{error}\n"
        f"{hint}"
        f"last lines of that step:\n{tail or '  | (no output)'}\n"
        f"full log: {log_path}"
    )


_COMPILER_ERROR = re.compile(
    r"(^|\s)(\S+:\d+(:\d+)?: (fatal )?error: .*|error: command .* failed.*|\S+\(\d+\): error.*)$"
)


def first_compiler_error(lines: list[str]) -> str:
    """``first compiler error: ...`` (gcc/clang ``file:line:col: error:``, nvcc ``file(line): error``),
    with a newline, when the failing step's output has one; else empty."""
    for line in lines:
        match = _COMPILER_ERROR.search(line.strip())
        if match:
            return f"first compiler error: {match.group(2)}\n"
    return ""
