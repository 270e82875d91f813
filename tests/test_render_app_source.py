"""The app source and the bundle: a bundle is never copied into itself (issue 25, finding 4), and app
files are hashed, scanned and copied by streaming, never read whole into memory."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_support import invoke

from envbuild.cli import _check, _render, cli  # noqa: F401  (register the commands)
from envbuild.filestream import CHUNK

PROFILE = 'name = "selfapp"\nkind = "pytorch"\nextends = "pytorch-cpu"\n[app]\nsource = "."\n'


def _render_out(profile: Path, out: Path) -> tuple[int, str, str]:
    result = invoke(["render", str(profile), "--force", "--out", str(out)])
    assert result.exception is None, result.exception
    return result.exit_code, result.stdout, result.stderr


def test_a_bundle_rendered_inside_its_app_source_is_not_copied_into_itself(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("print('hello')\n")
    profile = tmp_path / "p.toml"
    profile.write_text(PROFILE)
    bundle = tmp_path / "bundle"
    for _ in range(3):  # the attacker's input: `[app] source = "."` and `--out bundle`, re-rendered
        code, _, stderr = _render_out(profile, bundle)
        assert code == 0, stderr
    app = sorted(p.relative_to(bundle / "app").as_posix() for p in (bundle / "app").rglob("*"))
    assert app == [".keep", "main.py", "p.toml"]
    assert "app.source: skipped bundle/ (the --out folder" in stderr
    record = json.loads((bundle / "envbuild.rendered.json").read_text())
    assert sorted(record["written"]) == ["app/.keep", "app/main.py", "app/p.toml"]


def test_another_bundle_inside_the_app_source_is_skipped_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('hello')\n")
    profile = tmp_path / "p.toml"
    profile.write_text(PROFILE.replace('source = "."', 'source = "src"'))
    code, _, stderr = _render_out(profile, tmp_path / "src" / "old" / "b1")  # a bundle left in the source
    assert code == 0, stderr
    code, _, stderr = _render_out(profile, tmp_path / "elsewhere")
    assert code == 0, stderr
    assert sorted(p.name for p in (tmp_path / "elsewhere" / "app").rglob("*")) == [".keep", "main.py"]
    assert "envbuild: warning: app.source: skipped old/b1/ (an envbuild bundle" in stderr
    assert (tmp_path / "src" / "old").is_dir()  # skipped, not touched


_PEAK = textwrap.dedent(
    """
    import resource, sys
    from pathlib import Path
    from envbuild.plan import check
    from envbuild.profile import load_profile
    from envbuild.render import render_bundle

    result = check(load_profile(sys.argv[1]))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    render_bundle(result, Path(sys.argv[2]), command="envbuild render", force=True)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(before, after)
    """
)


def test_a_large_app_file_is_copied_without_being_read_whole(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    big = app / "weights.bin"
    with big.open("wb") as handle:  # 200 MiB, written in 1 MiB blocks
        block = bytes(range(256)) * 4096
        for _ in range(200):
            handle.write(block)
    profile = tmp_path / "p.toml"
    profile.write_text(PROFILE.replace('source = "."', 'source = "app"'))
    out = tmp_path / "bundle"
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(profile), str(out)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    before, after = (int(word) for word in done.stdout.split())
    assert after - before < 64 * 1024, (before, after)  # KiB: far below the file's 200 MiB
    assert (out / "app" / "weights.bin").stat().st_size == 200 << 20


def _planted(kind: str) -> str:
    body = secrets.token_hex(20)
    return f" hf_{body} " if kind == "token" else "-----BEGIN OPENSSH PRIVATE KEY-----\n" + body


@pytest.mark.parametrize(
    ("layout", "kind"),
    [("lines", "token"), ("one-line", "token"), ("one-line", "pem"), ("lines", "pem")],
)
def test_a_secret_across_a_chunk_boundary_is_found(tmp_path: Path, layout: str, kind: str) -> None:
    # A data file of 3 chunks, with the secret straddling the first chunk's end: one line of filler
    # ("one-line": no line break anywhere, so the scan must cut inside the line) or many short lines.
    filler = b"x" * (CHUNK - 10) if layout == "one-line" else b"0123456789abcde\n" * (CHUNK // 16)
    plant = _planted(kind).encode()
    tail = b"y" * (2 * CHUNK) if layout == "one-line" else b"more data\n" * (CHUNK // 5)
    (tmp_path / "src").mkdir()
    data = filler[: CHUNK - 10] + plant + tail
    (tmp_path / "src" / "data.txt").write_bytes(data)
    assert len(data) > 2 * CHUNK
    profile = tmp_path / "p.toml"
    profile.write_text(PROFILE.replace('source = "."', 'source = "src"'))
    checked = invoke(["check", str(profile)])
    assert checked.exit_code == 2, checked.output
    what = "a Hugging Face access token" if kind == "token" else "a private key"
    assert f"data.txt holds {what}" in checked.output
    assert plant.decode().strip() not in checked.output
