"""The wheelhouse follows the lock: exact files fetched with their hashes checked, a tampered or
moved wheelhouse caught (or accepted) before the Docker engine is contacted.

Real tools, no network beyond 127.0.0.1: a bundle is rendered from a small profile, locked with uv
against the loopback index of ``index_support`` and fetched from it.  ``DOCKER_HOST`` points at a socket
that does not exist, so "exit 3 (no engine)" proves every check before the engine passed, and an exit
1 naming the hashes proves the build stopped before contacting it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from index_support import IndexURLs, build_index_tree, make_tls, serve_index, sha256_of, tamper
from wheelhouse_support import locked_files, run, write_profile


def test_fetch_takes_exactly_the_locked_files(fetched: Path) -> None:
    files = locked_files(fetched)
    assert sorted(files) == ["fakedep-1.0-py3-none-any.whl", "leftpad-1.0-py3-none-any.whl"]
    house = fetched / "wheelhouse"
    assert sorted(p.name for p in house.glob("*.whl")) == sorted(files)
    for name, digest in files.items():
        assert sha256_of(house / name) == digest


def test_a_tampered_wheel_stops_the_build_before_the_engine(
    fetched: Path, no_engine_env: dict[str, str]
) -> None:
    wheel = fetched / "wheelhouse" / "fakedep-1.0-py3-none-any.whl"
    locked = locked_files(fetched)[wheel.name]
    tamper(wheel)
    got = sha256_of(wheel)
    assert got != locked
    proc = run("build", fetched, "--tag", "envbuild-test/wh:1", env=no_engine_env)
    assert proc.returncode == 1, proc.stderr
    assert f"fakedep==1.0: {wheel} has sha256 {got}, the lock says {locked}" in proc.stderr
    assert "Traceback" not in proc.stderr and not list(fetched.glob("build-*.log"))
    # fetch repairs it: the file whose hash differs is downloaded again
    proc = run("fetch", fetched, "--no-tools", env=no_engine_env)
    assert proc.returncode == 0, proc.stderr
    assert sha256_of(wheel) == locked


def test_a_moved_wheelhouse_still_matches(
    fetched: Path, tmp_path: Path, no_engine_env: dict[str, str]
) -> None:
    moved = tmp_path / "elsewhere" / "deeper" / "bundle"
    moved.parent.mkdir(parents=True)
    shutil.move(fetched, moved)
    house = tmp_path / "house"
    shutil.move(moved / "wheelhouse", house)
    (moved / "wheelhouse").mkdir()
    proc = run("build", moved, "--tag", "envbuild-test/wh:1", "--wheelhouse", house, env=no_engine_env)
    assert proc.returncode == 3, proc.stderr  # every check passed; only the (absent) engine is missing
    assert "Docker engine" in proc.stderr or "engine" in proc.stderr


def test_a_file_changed_at_its_source_is_refused_by_fetch(
    fetched: Path, tmp_path: Path, urls: IndexURLs, no_engine_env: dict[str, str]
) -> None:
    """The lock names a find-links file; its bytes change after locking: fetch keeps nothing."""
    folder = tmp_path / "links"
    folder.mkdir()
    (fetched / "wheelhouse" / "leftpad-1.0-py3-none-any.whl").rename(folder / "leftpad-1.0-py3-none-any.whl")
    lock = json.loads((fetched / "envbuild.lock.json").read_text())
    for dist in lock["distributions"]:
        for file in dist["files"]:
            if file["filename"].startswith("leftpad"):
                file["url"] = (folder / file["filename"]).as_uri()
    (fetched / "envbuild.lock.json").write_text(json.dumps(lock))
    tamper(folder / "leftpad-1.0-py3-none-any.whl")
    proc = run("fetch", fetched, "--no-tools", env=no_engine_env)
    assert proc.returncode == 1, proc.stderr
    assert "leftpad==1.0: leftpad-1.0-py3-none-any.whl from file://" in proc.stderr
    assert "but the lock says" in proc.stderr and "Nothing was kept" in proc.stderr
    assert not (fetched / "wheelhouse" / "leftpad-1.0-py3-none-any.whl").exists()


def test_lock_and_fetch_trust_the_ca_pip_users_set(tmp_path: Path, no_engine_env: dict[str, str]) -> None:
    """An index behind TLS signed by a private CA (a corporate mirror): PIP_CERT is honoured by the
    resolver (uv, as SSL_CERT_FILE) and by fetch's downloads; without it, a clear error."""
    tree = build_index_tree(tmp_path / "indexes")
    ca, cert, key = make_tls(tmp_path / "tls")
    profile = write_profile(tmp_path, "tls", "fakedep==1.1")
    bundle = tmp_path / "bundle"
    assert run("render", profile, "--out", bundle, env=no_engine_env).returncode == 0
    with serve_index(tree.main, tls=(cert, key)) as base:
        index = f"{base}/simple/"
        refused = run("lock", bundle, "--index-url", index, env={**no_engine_env, "UV_HTTP_RETRIES": "0"})
        assert refused.returncode == 3, refused.stderr  # an environment error (issue 23: exit 3)
        assert "TLS certificate is not trusted: point PIP_CERT or SSL_CERT_FILE" in refused.stderr
        assert "Traceback" not in refused.stderr
        trusted = {**no_engine_env, "PIP_CERT": str(ca)}
        proc = run("fetch", bundle, "--no-tools", "--index-url", index, env=trusted)
        assert proc.returncode == 0, proc.stderr
    (wheel,) = (bundle / "wheelhouse").glob("*.whl")
    assert wheel.name == "fakedep-1.1-py3-none-any.whl"
    assert sha256_of(wheel) == locked_files(bundle)[wheel.name]
    assert json.loads((bundle / "envbuild.lock.json").read_text())["resolution"]["index_urls"] == [index]
