"""Build envbuild's own wheel from the installed package, offline and without a build backend.

The validator inside an image lives in its own venv (``/opt/envbuild``) installed from the bundle's
``tools/`` folder.  This writes a plain ``py3-none-any`` wheel from the files of the running
installation (a wheel install or an editable checkout alike), with the installed distribution's
metadata, deterministically (sorted entries, fixed timestamps), so no index and no hatchling are
needed.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

import envbuild
from envbuild import __version__, atomic, resources
from envbuild.compat import tomllib
from envbuild.errors import BuildError

_DATE = (1980, 1, 1, 0, 0, 0)
_SKIP_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache"}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".so")  # envbuild is pure Python; nothing compiled belongs here


def _package_files() -> Iterator[tuple[str, Path]]:
    package = Path(envbuild.__file__).resolve().parent
    seen: set[str] = set()
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if any(part in _SKIP_DIRS for part in rel.parts) or not path.is_file() or path.is_symlink():
            continue
        if path.suffix in _SKIP_SUFFIXES:
            continue
        name = f"envbuild/{rel.as_posix()}"
        seen.add(name)
        yield name, path
    # In a checkout, templates/ and profiles/ sit beside the package; a wheel carries them in _data/.
    for data, root in (("templates", resources.templates_dir()), ("profiles", resources.profiles_dir())):
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part in _SKIP_DIRS for part in rel.parts) or not path.is_file() or path.is_symlink():
                continue
            name = f"envbuild/_data/{data}/{rel.as_posix()}"
            if name not in seen:
                yield name, path


def _metadata() -> str:
    """The installed distribution's METADATA; in a checkout that was never installed, the same fields
    read from ``pyproject.toml`` beside the package (one source for the dependencies, not a copy)."""
    try:
        text = importlib.metadata.distribution("envbuild").read_text("METADATA")
    except importlib.metadata.PackageNotFoundError:
        text = None
    if text:
        return text if text.endswith("\n") else text + "\n"
    return checkout_metadata(Path(envbuild.__file__).resolve().parent.parent / "pyproject.toml")


def checkout_metadata(pyproject: Path) -> str:
    """Core metadata (name, version, Requires-Python, Requires-Dist) from ``pyproject``'s ``[project]``."""
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        lines = [
            "Metadata-Version: 2.1",
            f"Name: {project['name']}",
            f"Version: {project['version']}",
            f"Requires-Python: {project['requires-python']}",
        ]
        lines += [f"Requires-Dist: {Requirement(text)}" for text in project["dependencies"]]
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, InvalidRequirement) as exc:
        raise BuildError(
            f"envbuild's own wheel: envbuild is not installed, and {pyproject} gives no usable [project] "
            f"table ({type(exc).__name__}: {exc}); install envbuild (pip install .) and run fetch again"
        ) from None
    return "\n".join(lines) + "\n"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_self_wheel(dest: Path) -> Path:
    """Write ``envbuild-<version>-py3-none-any.whl`` into ``dest`` and return its path."""
    dest.mkdir(parents=True, exist_ok=True)
    dist_info = f"envbuild-{__version__}.dist-info"
    entries: list[tuple[str, bytes]] = [(name, path.read_bytes()) for name, path in _package_files()]
    entries.append((f"{dist_info}/METADATA", _metadata().encode("utf-8")))
    wheel_meta = "Wheel-Version: 1.0\nGenerator: envbuild\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries.append((f"{dist_info}/WHEEL", wheel_meta.encode()))
    entries.append((f"{dist_info}/entry_points.txt", b"[console_scripts]\nenvbuild = envbuild.cli:main\n"))
    record = io.StringIO()
    rows = csv.writer(record, lineterminator="\n")
    for name, data in entries:
        rows.writerow([name, _record_hash(data), str(len(data))])
    rows.writerow([f"{dist_info}/RECORD", "", ""])
    entries.append((f"{dist_info}/RECORD", record.getvalue().encode()))
    target = dest / f"envbuild-{__version__}-py3-none-any.whl"
    with (
        atomic.writing(target) as out,
        zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive,
    ):
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return target
