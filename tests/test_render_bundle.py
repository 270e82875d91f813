"""render_bundle: the files, atomic replacement, what a re-render keeps, refusals, determinism, app/."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from render_support import cuda_plan, profile, result

from envbuild.errors import BundleError, IncompatibleError
from envbuild.models import Finding, Plan
from envbuild.render import bundle as bundle_module
from envbuild.render import render_bundle

COMMAND = "envbuild render train --target h100"
ERROR = Finding(severity="error", code="E-VENDOR-MISMATCH", message="cuda profile on an AMD card")
WARNING = Finding(severity="warning", code="W-PTX-JIT", message="runs through PTX JIT | slow *start*")

EXPECTED = [
    ".dockerignore",
    "Dockerfile",
    "README.md",
    "app/.keep",
    "certs/.keep",
    "envbuild.inputs.json",
    "envbuild.lock.json",
    "envbuild.rendered.json",
    "requirements-rebuild.txt",
    "tools/.keep",
    "wheelhouse/.keep",
]


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


def test_writes_every_file(tmp_path: Path) -> None:
    out = render_bundle(result(cuda_plan()), tmp_path / "b", command=COMMAND)
    assert out == tmp_path / "b"
    assert sorted(tree(out)) == EXPECTED
    for name, data in tree(out).items():
        if data:
            assert data.endswith(b"\n") and b"\r" not in data, name
    assert oct(out.stat().st_mode & 0o777) == "0o755"
    assert oct((out / "Dockerfile").stat().st_mode & 0o777) == "0o644"
    assert siblings(out) == ["b"]  # no temp folder left behind


def test_identical_inputs_give_identical_bytes(tmp_path: Path) -> None:
    a = render_bundle(result(cuda_plan(), WARNING), tmp_path / "a", command=COMMAND)
    b = render_bundle(result(cuda_plan(), WARNING), tmp_path / "b", command=COMMAND)
    assert tree(a) == tree(b)


def test_error_findings_refuse_and_write_nothing(tmp_path: Path) -> None:
    with pytest.raises(IncompatibleError, match="E-VENDOR-MISMATCH") as info:
        render_bundle(result(cuda_plan(), ERROR), tmp_path / "b", command=COMMAND)
    assert info.value.exit_code == 1
    assert list(tmp_path.iterdir()) == []


def test_force_writes_and_says_so(tmp_path: Path) -> None:
    out = render_bundle(result(cuda_plan(), ERROR, WARNING), tmp_path / "b", command=COMMAND, force=True)
    readme = (out / "README.md").read_text()
    assert "rendered with `--force` despite error findings" in readme
    assert "| error | `E-VENDOR-MISMATCH` | cuda profile on an AMD card |" in readme
    # markdown in a finding cannot break the table
    assert r"runs through PTX JIT \| slow \*start\*" in readme


def test_rerender_replaces_what_render_owns_and_keeps_the_rest(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    out = render_bundle(result(app_plan(tmp_path)), tmp_path / "b", command=COMMAND)
    kept = {
        "wheelhouse/numpy-2.1.3-cp312-cp312-manylinux_2_17_x86_64.whl": b"wheel",
        "wheelhouse/SHA256SUMS": b"abc  numpy-2.1.3-cp312-cp312-manylinux_2_17_x86_64.whl\n",
        "tools/envbuild-0.1.0-py3-none-any.whl": b"tool",
        "certs/x.crt": b"-----BEGIN CERTIFICATE-----\n",
        "build-myenv-1.log": b"step 1/9\n",
        "notes/todo.md": b"mine\n",
    }
    for rel, data in kept.items():
        (out / rel).parent.mkdir(exist_ok=True)
        (out / rel).write_bytes(data)
    inode = (out / "wheelhouse" / "SHA256SUMS").stat().st_ino
    (out / "Dockerfile").write_text("edited by hand\n")
    (out / "app" / "stray.py").write_text("not in the profile\n")
    (app / "config" / "pilot.json").write_text('{"n": 13}\n')
    (app / "src" / "pilot.py").unlink()
    (app / "src" / "new.py").write_text("print('new')\n")

    render_bundle(result(app_plan(tmp_path), WARNING), out, command=COMMAND)
    files = tree(out)
    assert {rel: files.get(rel) for rel in kept} == kept
    assert (out / "wheelhouse" / "SHA256SUMS").stat().st_ino == inode  # moved, not copied
    assert sorted(f for f in files if f.startswith("app/")) == [
        "app/.keep",
        "app/config/pilot.json",
        "app/src/new.py",
        "app/src/run.sh",
    ]
    assert files["app/config/pilot.json"] == b'{"n": 13}\n'
    assert files["kept-edits/app/stray.py"] == b"not in the profile\n"  # the user's: kept aside
    assert files["Dockerfile"].startswith(b"# ") and b"edited by hand" not in files["Dockerfile"]
    assert b"W-PTX-JIT" in files["README.md"]
    assert all(files[f"{d}/.keep"] == b"" for d in ("wheelhouse", "certs", "tools", "app"))
    assert siblings(out) == ["b", "proj"]


def test_rerender_refuses_to_lose_a_kept_path_unless_forced(tmp_path: Path) -> None:
    out = render_bundle(result(cuda_plan()), tmp_path / "b", command=COMMAND)
    shutil.rmtree(out / "certs")
    (out / "certs").write_text("a file where render writes a folder")
    (out / "README.md").unlink()
    (out / "README.md").mkdir()
    (out / "README.md" / "draft.md").write_text("a folder where render writes a file")
    (out / "wheelhouse" / "a.whl").write_bytes(b"kept")
    before = tree(out)
    with pytest.raises(BundleError, match="would lose 2 path") as info:
        render_bundle(result(cuda_plan(python_version="3.11")), out, command=COMMAND)
    assert info.value.exit_code == 2
    assert f"{out / 'certs'} (a file or link where the bundle has a folder)" in str(info.value)
    assert f"{out / 'README.md'} (a folder where the bundle has a file)" in str(info.value)
    assert tree(out) == before and siblings(out) == ["b"]

    render_bundle(result(cuda_plan(python_version="3.11")), out, command=COMMAND, force=True)
    files = tree(out)
    assert files["certs/.keep"] == b"" and (out / "README.md").is_file()
    assert files["wheelhouse/a.whl"] == b"kept"  # what can be kept still is
    assert "python3.11 -m venv" in files["Dockerfile"].decode()
    assert siblings(out) == ["b"]


def test_empty_folder_is_used(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    render_bundle(result(cuda_plan()), tmp_path / "b", command=COMMAND)
    assert sorted(tree(tmp_path / "b")) == EXPECTED


@pytest.mark.parametrize("content", ["Dockerfile", "notes.txt", "envbuild.lock.json"])
def test_foreign_folder_is_never_clobbered(tmp_path: Path, content: str) -> None:
    out = tmp_path / "b"
    out.mkdir()
    (out / content).write_text('{"format": "something else"}')
    with pytest.raises(BundleError, match="not an envbuild bundle"):
        render_bundle(result(cuda_plan()), out, command=COMMAND)
    assert tree(out) == {content: b'{"format": "something else"}'}
    assert siblings(out) == ["b"]


def test_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "b").write_text("mine")
    with pytest.raises(BundleError, match="not a folder"):
        render_bundle(result(cuda_plan()), tmp_path / "b", command=COMMAND)
    assert (tmp_path / "b").read_text() == "mine"


def test_failure_while_writing_keeps_the_previous_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = render_bundle(result(cuda_plan()), tmp_path / "b", command=COMMAND)
    before = tree(out)
    calls = {"n": 0}
    real = Path.write_bytes

    def failing(self: Path, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", failing)
    with pytest.raises(BundleError, match="cannot write the bundle: No space"):
        render_bundle(result(cuda_plan(python_version="3.11")), out, command=COMMAND)
    assert tree(out) == before
    assert siblings(out) == ["b"]


def test_failure_while_swapping_restores_the_previous_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = render_bundle(result(cuda_plan()), tmp_path / "b", command=COMMAND)
    (out / "wheelhouse" / "a.whl").write_bytes(b"fetched")  # moved into the new tree, then back
    (out / "notes.txt").write_text("mine")
    before = tree(out)
    real = os.rename

    def failing(src: str | Path, dst: str | Path) -> None:
        if Path(src).name.startswith(".b.tmp-"):
            raise OSError(5, "I/O error")
        real(src, dst)

    monkeypatch.setattr(bundle_module.os, "rename", failing)
    with pytest.raises(BundleError, match="cannot write the bundle: I/O error"):
        render_bundle(result(cuda_plan(python_version="3.11")), out, command=COMMAND)
    assert tree(out) == before
    assert siblings(out) == ["b"]


def make_app(root: Path) -> Path:
    app = root / "proj" / "app"
    (app / "src" / "__pycache__").mkdir(parents=True)
    (app / "config").mkdir()
    (app / "src" / "pilot.py").write_text("print('pilot')\n")
    (app / "src" / "run.sh").write_text("#!/bin/sh\n")
    (app / "src" / "run.sh").chmod(0o755)
    (app / "src" / "__pycache__" / "pilot.cpython-311.pyc").write_bytes(b"\0")
    (app / ".git").mkdir()
    (app / ".git" / "HEAD").write_text("ref")
    (app / "config" / "pilot.json").write_text('{"n": 12}\n')
    return app


def app_plan(root: Path) -> Plan:
    return cuda_plan(profile=profile(app={"source": "app"}, folder=str(root / "proj")))


def test_app_folder_is_copied(tmp_path: Path) -> None:
    make_app(tmp_path)
    (tmp_path / "proj" / "app" / "link.json").symlink_to("config/pilot.json")
    out = render_bundle(result(app_plan(tmp_path)), tmp_path / "b", command=COMMAND)
    files = tree(out)
    assert sorted(f for f in files if f.startswith("app/")) == [
        "app/.keep",
        "app/config/pilot.json",
        "app/link.json",
        "app/src/pilot.py",
        "app/src/run.sh",
    ]
    assert files["app/link.json"] == b'{"n": 12}\n'
    assert (out / "app" / "src" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "app" / "src" / "pilot.py").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_app_symlink_escaping_is_refused(tmp_path: Path, kind: str) -> None:
    make_app(tmp_path)
    outside = tmp_path / "secret"
    if kind == "file":
        outside.write_text("key")
    else:
        outside.mkdir()
    (tmp_path / "proj" / "app" / "leak").symlink_to(outside)
    with pytest.raises(BundleError, match="leak is a link that leads outside"):
        render_bundle(result(app_plan(tmp_path)), tmp_path / "b", command=COMMAND)
    assert not (tmp_path / "b").exists()


def test_app_symlink_loop_is_refused(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    (app / "src" / "again").symlink_to(app)
    with pytest.raises(BundleError, match="symlink loop"):
        render_bundle(result(app_plan(tmp_path)), tmp_path / "b", command=COMMAND)


def test_missing_app_folder_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    with pytest.raises(BundleError, match=r"app.source: 'app' is not a folder"):
        render_bundle(result(app_plan(tmp_path)), tmp_path / "b", command=COMMAND)


@pytest.mark.parametrize(
    "name", [".env", ".env.production", "id_rsa", "server.pem", "tls.key", ".netrc", ".aws"]
)
def test_app_credential_files_are_refused(tmp_path: Path, name: str) -> None:
    app = make_app(tmp_path)
    target = app / "config" / name
    if name == ".aws":
        target.mkdir()
        (target / "credentials").write_text("[default]\n")
    elif name.endswith((".pem", ".key")):  # refused for what they hold (a public certificate may stay)
        target.write_text("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n")
    else:
        target.write_text("SECRET=1\n")
    with pytest.raises(BundleError, match=f"config/{re.escape(name)} .*secrets never go into a bundle"):
        render_bundle(result(app_plan(tmp_path)), tmp_path / "b", command=COMMAND)
    assert not (tmp_path / "b").exists()


def test_app_virtualenv_is_skipped(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    (app / ".venv" / "bin").mkdir(parents=True)
    (app / ".venv" / "bin" / "python").write_text("")
    files = tree(render_bundle(result(app_plan(tmp_path)), tmp_path / "b", command=COMMAND))
    assert not any(".venv" in f for f in files)
