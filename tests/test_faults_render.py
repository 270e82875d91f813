"""Faults while rendering (issue 12, item 5): a full disk, and two renders into one folder at once.

Real processes (``python -m envbuild render``) and a real full filesystem (a small tmpfs mounted for the
test; root needed).  The profiles are written here by hand; their app folders hold many files so that
writing a bundle takes long enough for two renders to overlap.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from build_support import envbuild, fill_up, small_tmpfs, tree_bytes
from cli_support import ENVBUILD

APP_FILES = 1500


def write_profile(folder: Path, name: str, package: str) -> Path:
    app = folder / f"{name}-app"
    app.mkdir(parents=True)
    for i in range(APP_FILES):
        (app / f"m{i:04d}.py").write_text(f"# {name} module {i}\nVALUE = {i}\n")
    profile = folder / f"{name}.toml"
    profile.write_text(
        f'name = "{name}"\nkind = "custom"\n[base]\nos = "debian12"\n'
        f'[python]\nversion = "3.11"\npackages = ["{package}"]\n[app]\nsource = "{name}-app"\n'
    )
    return profile


def reference(profile: Path, out: Path) -> dict[str, bytes]:
    proc = envbuild("render", profile, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return tree_bytes(out)


def leftovers(parent: Path, name: str) -> list[str]:
    """Temporary folders, old copies and lock files a render leaves beside its bundle (none)."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def test_two_renders_into_one_folder_at_once_never_mix(tmp_path: Path) -> None:
    """Two real render processes started together, four times (twice over a previous bundle).

    How many overlap depends on the machine (here 3 of 8 renders were refused); whichever way each
    round goes, the folder holds exactly one render's files and a refused render says why.  That the
    lock is honoured at all is proven deterministically by the next test."""
    a = write_profile(tmp_path, "alpha", "six==1.17.0")
    b = write_profile(tmp_path, "beta", "idna==3.10")
    ref_a, ref_b = reference(a, tmp_path / "ref-a"), reference(b, tmp_path / "ref-b")
    assert ref_a != ref_b
    refused = 0
    for round_ in range(4):
        out = tmp_path / f"round{round_}" / "bundle"
        if round_ % 2:  # a previous bundle to replace (its kept wheelhouse/ must survive whole)
            assert envbuild("render", a, "--out", out).returncode == 0
            (out / "wheelhouse" / "fetched.whl").write_bytes(b"kept across renders (hand-written)")
        procs = [
            subprocess.Popen(
                [*ENVBUILD, "render", str(p), "--out", str(out)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for p in (a, b)
        ]
        results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
        for code, err in results:
            assert code in (0, 2), err
            assert "Traceback" not in err
            if code == 2:
                refused += 1
                assert f"{out}: another envbuild render is writing this bundle now" in err
                assert "nothing was changed" in err
        assert any(code == 0 for code, _ in results)
        got = tree_bytes(out)
        kept = got.pop("wheelhouse/fetched.whl", None)
        assert got in (ref_a, ref_b), "the bundle mixes two renders' files"
        assert (kept is not None) == bool(round_ % 2)
        assert leftovers(out.parent, "bundle") == []
    print(f"renders refused by the lock: {refused} of 8")


def test_a_render_finding_the_lock_held_fails_at_once_and_changes_nothing(tmp_path: Path) -> None:
    """The lock held by another process (this test, with the same flock a render takes)."""
    a = write_profile(tmp_path, "alpha", "six==1.17.0")
    b = write_profile(tmp_path, "beta", "idna==3.10")
    out = tmp_path / "bundle"
    before = reference(a, out)
    fd = os.open(tmp_path / ".bundle.render-lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        proc = envbuild("render", b, "--out", out)
        assert time.monotonic() - started < 30  # refused at once, not waiting for the lock
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(
            f"envbuild: error: {out}: another envbuild render is writing this bundle now "
            f"(it holds {tmp_path / '.bundle.render-lock'}); nothing was changed"
        ), proc.stderr
        assert tree_bytes(out) == before
    finally:
        os.close(fd)
    proc = envbuild("render", b, "--out", out)  # released: the same render goes through
    assert proc.returncode == 0, proc.stderr
    assert tree_bytes(out) != before
    assert leftovers(tmp_path, "bundle") == []  # the file this test made, taken over and removed


def test_a_killed_render_leaves_no_lock_that_blocks_the_next(tmp_path: Path) -> None:
    """The lock is the process's: a render killed while holding it does not block the next one."""
    a = write_profile(tmp_path, "alpha", "six==1.17.0")
    out = tmp_path / "bundle"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\n"
            "from envbuild.render.render_lock import render_lock\n"
            f"with render_lock(Path({str(out)!r})):\n    print('held', flush=True)\n    time.sleep(300)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert envbuild("render", a, "--out", out).returncode == 2
        holder.kill()
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
    proc = envbuild("render", a, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert leftovers(tmp_path, "bundle") == []  # the stale lock file taken over, then removed


def test_render_onto_a_full_disk_names_the_path_and_keeps_the_previous_bundle(tmp_path: Path) -> None:
    small = tmp_path / "small.toml"
    small.write_text(
        'name = "small"\nkind = "custom"\n[base]\nos = "debian12"\n[python]\nversion = "3.11"\n'
        'packages = ["six==1.17.0"]\n'
    )
    other = write_profile(tmp_path, "alpha", "six==1.17.0")
    with small_tmpfs(tmp_path / "disk", 512) as disk:
        out = disk / "bundle"
        before = reference(small, out)
        (out / "wheelhouse" / "fetched.whl").write_bytes(b"kept across renders (hand-written)")
        before = tree_bytes(out)
        fill_up(disk)

        proc = envbuild("render", other, "--out", out)
        assert proc.returncode == 2, proc.stderr
        assert (
            f"envbuild: error: {out}: cannot write the bundle: No space left on device (writing {out}/"
            in (proc.stderr)
        )
        assert "nothing was changed (the previous bundle is as it was)" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert tree_bytes(out) == before  # the previous bundle whole, its kept wheelhouse file included
        assert sorted(p.name for p in disk.iterdir()) == ["bundle", "filler"]  # no temp folder, no lock

        proc = envbuild("render", other, "--out", disk / "fresh")  # a new folder: nothing at all is left
        assert proc.returncode == 2, proc.stderr
        assert f"{disk / 'fresh'}: cannot write the bundle: No space left on device" in proc.stderr
        assert sorted(p.name for p in disk.iterdir()) == ["bundle", "filler"]
