"""``envbuild render``: a checked plan becomes a build bundle (see docs/architecture.md).

Public API: :func:`render_bundle` (:func:`render_into` says what a re-render kept), :func:`make_lock`,
:func:`render_dockerfile`, :func:`render_files`, :func:`was_resolved`.  Nothing here imports torch or
docker.

No output path goes into a bundle: the same inputs give the same bytes wherever the bundle is written.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from envbuild.errors import IncompatibleError
from envbuild.filestream import Content
from envbuild.models import INPUTS_FILE, CheckResult, Plan, lock_json
from envbuild.profile.appdir import collect_app
from envbuild.render.bundle import Written, app_source, write_bundle
from envbuild.render.constraints import collect_constraints
from envbuild.render.inputs import inputs_json, inputs_of
from envbuild.render.lockfile import make_lock
from envbuild.render.previous import KEEP_DIRS, was_resolved
from envbuild.render.readme import render_readme
from envbuild.render.requirements import render_requirements
from envbuild.render.source_build import PROBE_OPS_SCRIPT, PROBE_OPS_SOURCE
from envbuild.render.view import dockerfile_view
from envbuild.templating import render_template

__all__ = [
    "default_out",
    "make_lock",
    "render_bundle",
    "render_dockerfile",
    "render_files",
    "render_into",
    "was_resolved",
]

DOCKERIGNORE = """\
# Build context = this bundle. Keep out what the image must not contain or does not need.
**/__pycache__
**/*.py[cod]
**/.git
**/.hg
**/.svn
**/.DS_Store
*.log
runs/
README.md
kept-edits/
"""


def default_out(plan: Plan) -> Path:
    """``./<profile>-<target ids>``, the ``--out`` default."""
    ids = "-".join(card.id for card in plan.targets)
    return Path(f"{plan.profile.name}-{ids}" if ids else plan.profile.name)


def render_dockerfile(plan: Plan, command: str = "envbuild render") -> str:
    return render_template("dockerfiles/Dockerfile.j2", v=dockerfile_view(plan, command))


def render_files(
    result: CheckResult,
    command: str,
    *,
    bake: bool = False,
    targets: tuple[str, ...] | None = None,
    driver: str | None = None,
) -> tuple[dict[str, Content], frozenset[str]]:
    """Every file of the bundle: (relative path -> bytes, or an app file's
    :class:`~envbuild.filestream.FileCopy`, copied at write time; executable paths).

    ``bake`` adds ``docker-bake.hcl`` (:mod:`envbuild.render.bake`); ``targets`` are the ``--target``
    ids the plan was checked with (None: the profile's own) and ``driver`` its ``--driver``, both recorded in
    ``envbuild.inputs.json``."""
    files, executable, _ = _render_files(result, command, bake=bake, targets=targets, driver=driver)
    return files, executable


def _render_files(
    result: CheckResult,
    command: str,
    *,
    bake: bool = False,
    targets: tuple[str, ...] | None = None,
    driver: str | None = None,
    out: Path | None = None,
) -> tuple[dict[str, Content], frozenset[str], tuple[str, ...]]:
    """:func:`render_files`, and the folders of the app source skipped as bundles (``out``: the bundle
    folder being written, skipped too when it lies inside the app source)."""
    plan = result.plan
    constraints = collect_constraints(plan)
    files: dict[str, str] = {
        "Dockerfile": render_dockerfile(plan, command),
        ".dockerignore": DOCKERIGNORE,
        "README.md": render_readme(result, command),
        "requirements-rebuild.txt": render_requirements(plan, command, constraints),
        "envbuild.lock.json": lock_json(make_lock(plan)),
        INPUTS_FILE: inputs_json(inputs_of(plan, command, targets=targets, bake=bake, driver=driver)),
    }
    if bake:
        from envbuild.render.bake import render_bake

        files["docker-bake.hcl"] = render_bake(result, command)
    written: dict[str, Content] = {name: text.encode("utf-8") for name, text in files.items()}
    for constraint in constraints:
        written[constraint.bundle_path] = constraint.data
    for folder in KEEP_DIRS:
        written[f"{folder}/.keep"] = b""
    if plan.profile.python.build_from_source:  # the Dockerfile copies it: wheels kept by `envbuild build`
        written["built-wheels/.keep"] = b""
    if plan.probe_ops:  # the builder stage runs it: the validator's ops, compiled with the image
        written[PROBE_OPS_SCRIPT] = PROBE_OPS_SOURCE.read_bytes()
    executable: set[str] = set()
    skipped: tuple[str, ...] = ()
    root = app_source(plan.profile)
    if root is not None:
        app = collect_app(root, f"{plan.profile.path}: app.source", out=out)
        for rel, copy in app.files.items():
            written[f"app/{rel}"] = copy
            if os.access(root / rel, os.X_OK):
                executable.add(f"app/{rel}")
        skipped = app.skipped
    return dict(sorted(written.items())), frozenset(executable), skipped


def render_bundle(
    result: CheckResult,
    out: Path,
    *,
    command: str,
    force: bool = False,
    bake: bool = False,
    targets: tuple[str, ...] | None = None,
    discard_edits: bool = False,
    driver: str | None = None,
) -> Path:
    """Write the bundle for ``result`` to ``out`` atomically and return its absolute path.

    Re-rendering into a previous bundle keeps what render does not own (``wheelhouse/``, ``tools/``,
    ``certs/``, logs, notes; see :mod:`envbuild.render.bundle`), its resolved lock when the inputs did not
    change, and the user's edits under ``app/`` and ``constraints/`` in ``kept-edits/`` unless
    ``discard_edits`` (:mod:`envbuild.render.rerender`; :func:`render_into` says which).  ``command`` is
    recorded in the bundle as the way to regenerate it; it must not name ``out``, so that the bytes do
    not depend on where the bundle is written.

    Raises :class:`IncompatibleError` (writing nothing) when the plan has error findings and
    ``force`` is false; :class:`envbuild.errors.BundleError` when ``out`` is not ours to replace, or
    when a kept path would be lost and ``force`` is false.
    """
    return render_into(
        result,
        out,
        command=command,
        force=force,
        bake=bake,
        targets=targets,
        discard_edits=discard_edits,
        driver=driver,
    ).path


def render_into(
    result: CheckResult,
    out: Path,
    *,
    command: str,
    force: bool = False,
    bake: bool = False,
    targets: tuple[str, ...] | None = None,
    discard_edits: bool = False,
    driver: str | None = None,
) -> Written:
    """:func:`render_bundle`, saying what it did with the previous bundle (its lock, the user's edits)."""
    if not result.ok and not force:
        errors = [f for f in result.findings if f.severity == "error"]
        lines = [f"  - {f.code}: {f.message}" for f in errors]
        raise IncompatibleError(
            f"profile {result.plan.profile.name}: {len(errors)} error finding(s); nothing written "
            "(use --force to render anyway):\n" + "\n".join(lines)
        )
    files, executable, skipped = _render_files(
        result, command, bake=bake, targets=targets, driver=driver, out=Path(out)
    )
    written = write_bundle(files, Path(out), executable, force=force, discard_edits=discard_edits)
    return replace(written, skipped=skipped) if skipped else written
