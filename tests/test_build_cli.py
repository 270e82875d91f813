"""CLI wiring of fetch/build/validate --image that needs no engine: usage errors exit 2, no traceback."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import cli_support
import pytest
from cli_support import environ

TINY = Path(__file__).parent / "data" / "bundles" / "tiny"
NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock", "PIP_RETRIES": "0"}


def envbuild(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return cli_support.envbuild(*args, env=environ(**NO_ENGINE, **env), cwd=cwd, timeout=300)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["validate", "--gpus", "2"], "--gpus needs --image"),
        (["validate", "--image", "x:1", "--lock", "l.json"], "drop --lock/--python"),
        (["validate", "--image", "x:1", "--gpus", "zero"], "--gpus: 'zero' is not valid"),
        (["validate", "--image", "Not An Image"], "--image: 'Not An Image' is not a valid image reference"),
        (["build", "no-such-profile-xyz", "--tag", "x:1"], "no-such-profile-xyz"),
        (["build", str(TINY), "--tag", "x:1", "--target", "h100"], "--target applies to a profile"),
        (["fetch", "/nonexistent/bundle"], "not a bundle directory"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    proc = envbuild(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_build_refuses_an_unlocked_bundle_before_the_engine(tmp_path: Path) -> None:
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY, bundle)  # rendered, never locked ("resolved" absent: false)
    proc = envbuild("build", str(bundle), "--tag", "x:1")
    assert proc.returncode == 2, proc.stdout + proc.stderr  # 3 would mean the engine was asked first
    assert f"{bundle}: not locked, so its requirements carry no hashes" in proc.stderr
    assert f"run `envbuild lock {bundle}`" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(bundle.glob("build-*.log"))


def test_fetch_command_reports_what_it_fetched(tmp_path: Path) -> None:
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY, bundle)
    proc = envbuild("fetch", str(bundle), "--no-tools")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"locked the bundle, then fetched 1 wheel(s) into {bundle}/wheelhouse in ")
    assert (bundle / "wheelhouse" / "six-1.17.0-py2.py3-none-any.whl").is_file()
    assert not list((bundle / "tools").glob("*.whl"))


def test_build_profile_ref_checks_arguments_before_rendering(tmp_path: Path) -> None:
    proc = envbuild("build", "pytorch-cpu", "--tag", "BAD TAG", XDG_CACHE_HOME=str(tmp_path))
    assert proc.returncode == 2 and "--tag: 'BAD TAG'" in proc.stderr
    assert not (tmp_path / "envbuild" / "bundles").exists()  # nothing rendered, nothing fetched


def test_build_without_engine_exits_3_before_rendering(tmp_path: Path) -> None:
    proc = envbuild("build", "ubuntu", "--tag", "x:1", XDG_CACHE_HOME=str(tmp_path))
    assert proc.returncode == 3, proc.stderr
    assert "cannot reach the Docker engine at unix:///nonexistent/docker.sock" in proc.stderr
    assert "scripts/docker-engine.sh" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "envbuild" / "bundles").exists()  # nothing rendered, nothing fetched


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    from build_support import lock_by_hand

    bundle = tmp_path / "tiny"
    shutil.copytree(TINY, bundle)
    return lock_by_hand(bundle)


def test_engine_unreachable_exits_3(tiny: Path) -> None:
    proc = envbuild("build", str(tiny), "--tag", "envbuild-test/x:1")
    assert proc.returncode == 3
    assert "cannot reach the Docker engine" in proc.stderr
    assert "scripts/docker-engine.sh" in proc.stderr and "sudo dockerd" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list(tiny.glob("build-*.log"))
    proc = envbuild("validate", "--image", "envbuild-test/x:1")
    assert proc.returncode == 3, proc.stderr
    assert "cannot reach the Docker engine" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tag", "Bad Tag"], "--tag: 'Bad Tag' is not a valid image tag"),
        (["--tag", "x:1", "--base-image", "debian:12\nRUN evil"], "--base-image:"),
        (["--tag", "x:1", "--network", "container:abc"], "valid choices: bridge, default, host, none"),
        (["--tag", "x:1", "--ca-cert", str(TINY / "Dockerfile")], "no PEM certificate found"),
    ],
)
def test_bad_build_arguments_exit_2_before_any_work(tiny: Path, args: list[str], message: str) -> None:
    proc = envbuild("build", str(tiny), *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert not list(tiny.glob("build-*.log"))


def test_profile_cache_folder_follows_the_rendered_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envbuild.image.cache import render_cached, resolve_source

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first, result = resolve_source("ubuntu", ())
    again, _ = resolve_source("ubuntu", ())
    assert (
        result is not None and first == again and first.parent == tmp_path / "cache" / "envbuild" / "bundles"
    )
    render_cached(first, result, (), force=False)
    (first / "wheelhouse" / "fetched-1.0-py3-none-any.whl").write_bytes(b"kept")
    render_cached(first, result, (), force=False)  # reused as is: the fetched wheelhouse stays
    assert (first / "wheelhouse" / "fetched-1.0-py3-none-any.whl").read_bytes() == b"kept"
    profile = tmp_path / "more.toml"
    profile.write_text('name = "ubuntu"\nkind = "ubuntu"\nextends = "ubuntu"\n\n[system]\napt = ["jq"]\n')
    changed, _ = resolve_source(str(profile), ())
    assert changed != first and changed.name.startswith("ubuntu-")
    assert not changed.exists()  # resolving writes nothing


def test_unwritable_build_log_is_a_usage_error(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envbuild.errors import BundleError
    from envbuild.image import build as image

    blocked = tiny / "Dockerfile" / "build-x-1.log"  # under a file: cannot be created
    monkeypatch.setattr(image, "log_path_for", lambda bundle, tag: blocked)
    with pytest.raises(BundleError, match=r"build-x-1\.log: cannot write the build log"):
        image.build_image(tiny, "x:1", progress=False, client=object())


def test_bundle_with_a_damaged_lock_is_refused_before_the_engine(tiny: Path) -> None:
    (tiny / "envbuild.lock.json").write_bytes(b"\xff\xfe not a lock")
    for args in (["build", str(tiny), "--tag", "x:1"], ["fetch", str(tiny), "--no-tools"]):
        proc = envbuild(*args)
        assert proc.returncode == 2, proc.stderr
        assert f"{tiny / 'envbuild.lock.json'}: not UTF-8 text" in proc.stderr
        assert "Traceback" not in proc.stderr and "warning" not in proc.stderr
    assert not list(tiny.glob("build-*.log"))
