"""Re-rendering into a previous bundle: a resolved lock kept when nothing changed, named changes when
something did, and the user's edits under ``app/`` and ``constraints/`` kept aside (or dropped with
``--discard-edits``), never deleted silently.

The locks are real: ``envbuild lock`` runs uv against a loopback index (tests/index_support.py) serving
leftpad 1.0 (which needs fakedep<1.1) and fakedep 1.0, with no PIP_*/UV_* settings and a private uv cache.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import Result, invoke
from index_support import make_wheel, serve_index

LOCK = "envbuild.lock.json"
RECORD = "envbuild.rendered.json"


# ---------------------------------------------------------------- helpers and fixtures


@pytest.fixture(scope="module")
def index_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("index")
    make_wheel(root, "fakedep", "1.0")
    make_wheel(root, "leftpad", "1.0", requires=["fakedep<1.1"])
    with serve_index(root) as base:
        yield f"{base}/simple/"


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture
def clean_env(uv_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No PIP_*/UV_* settings, no pip config, loopback exempt from proxies, a private uv cache."""
    for key in list(os.environ):
        if key.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(key)
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1", "localhost"]))
    monkeypatch.setenv("NO_PROXY", no_proxy)
    monkeypatch.setenv("no_proxy", no_proxy)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("UV_CACHE_DIR", str(uv_cache))


def write_project(root: Path, packages: tuple[str, ...] = ("leftpad",)) -> Path:
    """``root/profile.toml`` (custom, Debian 12, Python 3.11) with ``-c constraints.txt`` and an app."""
    (root / "app" / "src").mkdir(parents=True, exist_ok=True)
    (root / "app" / "src" / "main.py").write_text("print('main')\n")
    (root / "app" / "README.txt").write_text("the app\n")
    (root / "constraints.txt").write_text("fakedep<2\n")
    (root / "requirements.txt").write_text("-c constraints.txt\n")
    profile = root / "profile.toml"
    profile.write_text(
        'name = "proj"\nkind = "custom"\n[base]\nos = "debian12"\n'
        f'[python]\nversion = "3.11"\npackages = {json.dumps(list(packages))}\n'
        'requirements = ["requirements.txt"]\n[app]\nsource = "app"\n'
    )
    return profile


def render(profile: Path, out: Path, *args: str) -> Result:
    result = invoke(["render", str(profile), "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return result


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def resolved(bundle: Path) -> bool:
    return json.loads((bundle / LOCK).read_text())["resolved"] is True


@pytest.fixture
def locked(tmp_path: Path, index_url: str, clean_env: None) -> tuple[Path, Path]:
    """(profile, bundle): the bundle rendered, then locked for real against the loopback index."""
    profile = write_project(tmp_path / "proj")
    bundle = tmp_path / "bundle"
    render(profile, bundle)
    done = invoke(["lock", str(bundle), "--index-url", index_url])
    assert done.exit_code == 0, done.output
    assert resolved(bundle)
    return profile, bundle


# ---------------------------------------------------------------- the lock


def test_unchanged_inputs_keep_a_locked_bundle_byte_identical(locked: tuple[Path, Path]) -> None:
    profile, bundle = locked
    before = tree(bundle)
    assert b"--hash=sha256:" in before["requirements-rebuild.txt"]

    again = render(profile, bundle)
    assert tree(bundle) == before  # the lock, Dockerfile, README and everything else, byte for byte
    assert "the inputs did not change, so the lock `envbuild lock` resolved is kept" in again.stderr
    assert "dropped" not in again.stderr and "kept-edits" not in again.stderr


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("packages", "python.lines, python.packages"),
        ("constraints", "constraints/01-constraints.txt"),
        ("target", "targets"),
    ],
)
def test_changed_inputs_are_named_and_drop_the_lock(
    locked: tuple[Path, Path], tmp_path: Path, change: str, named: str
) -> None:
    profile, bundle = locked
    args: tuple[str, ...] = ()
    if change == "packages":
        write_project(profile.parent, packages=("leftpad", "fakedep"))
    elif change == "constraints":
        (profile.parent / "constraints.txt").write_text("fakedep<1.5\n")
    else:
        args = ("--target", "h100")

    again = render(profile, bundle, *args)
    assert f"was locked, and what it is rendered from changed: {named}. The lock was dropped" in again.stderr
    assert f"`envbuild lock {bundle}` restores it" in again.stderr
    fresh = render(profile, tmp_path / "fresh", *args)  # what an unlocked render writes
    assert "locked" not in fresh.stderr
    assert not resolved(bundle)
    for name in ("requirements-rebuild.txt", LOCK, "Dockerfile", "README.md", RECORD):
        assert (bundle / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name


def test_the_same_inputs_declared_differently_drop_the_lock(locked: tuple[Path, Path]) -> None:
    """The previous render (an older envbuild, or another catalog) declared another resolver input."""
    profile, bundle = locked
    record = json.loads((bundle / RECORD).read_text())
    record["resolver_input"]["declared"] = record["resolver_input"]["declared"][:-1]
    (bundle / RECORD).write_text(json.dumps(record))

    again = render(profile, bundle)
    assert "what it is rendered from changed: lock.declared. The lock was dropped" in again.stderr
    assert not resolved(bundle)


# ---------------------------------------------------------------- the user's edits


@pytest.fixture
def rendered(tmp_path: Path) -> tuple[Path, Path]:
    """(profile, bundle): rendered once, never locked."""
    profile = write_project(tmp_path / "proj")
    bundle = tmp_path / "bundle"
    render(profile, bundle)
    return profile, bundle


def test_an_edited_app_file_is_kept_aside_and_named(rendered: tuple[Path, Path]) -> None:
    profile, bundle = rendered
    (bundle / "app" / "src" / "main.py").write_text("print('my fix')\n")

    again = render(profile, bundle)
    assert (bundle / "app" / "src" / "main.py").read_text() == "print('main')\n"  # from the profile
    assert (bundle / "kept-edits" / "app" / "src" / "main.py").read_text() == "print('my fix')\n"
    assert "1 of your change(s) under app/ or constraints/" in again.stderr
    assert "  - app/src/main.py (edited) -> kept-edits/app/src/main.py\n" in again.stderr
    assert "kept-edits/" in (bundle / ".dockerignore").read_text().splitlines()  # not in the image

    render(profile, bundle)  # nothing edited since: nothing more kept, the kept copy stays
    assert sorted(tree(bundle / "kept-edits")) == ["app/src/main.py"]


def test_an_added_file_is_kept_and_a_deleted_one_is_written_again(rendered: tuple[Path, Path]) -> None:
    profile, bundle = rendered
    (bundle / "app" / "notes.md").write_text("mine\n")
    (bundle / "app" / "data").mkdir()
    (bundle / "app" / "data" / "x.csv").write_text("1,2\n")
    (bundle / "constraints" / "mine.txt").write_text("numpy<3\n")
    (bundle / "app" / "README.txt").unlink()

    again = render(profile, bundle)
    assert tree(bundle / "kept-edits") == {
        "app/data/x.csv": b"1,2\n",
        "app/notes.md": b"mine\n",
        "constraints/mine.txt": b"numpy<3\n",
    }
    for line in (
        "  - app/data/ (added) -> kept-edits/app/data",
        "  - app/notes.md (added) -> kept-edits/app/notes.md",
        "  - constraints/mine.txt (added) -> kept-edits/constraints/mine.txt",
    ):
        assert line in again.stderr.splitlines()
    assert (bundle / "app" / "README.txt").read_text() == "the app\n"
    assert "had been deleted from the bundle): app/README.txt" in again.stderr
    assert not (bundle / "app" / "notes.md").exists() and not (bundle / "constraints" / "mine.txt").exists()


def test_an_edit_the_new_render_writes_too_stays_in_place(rendered: tuple[Path, Path]) -> None:
    profile, bundle = rendered
    (bundle / "app" / "src" / "main.py").write_text("print('v2')\n")
    (profile.parent / "app" / "src" / "main.py").write_text("print('v2')\n")  # the same change at the source

    again = render(profile, bundle)
    assert (bundle / "app" / "src" / "main.py").read_text() == "print('v2')\n"
    assert not (bundle / "kept-edits").exists() and "change(s)" not in again.stderr


def test_a_second_edit_of_the_same_file_gets_the_next_name(rendered: tuple[Path, Path]) -> None:
    profile, bundle = rendered
    for text in ("one\n", "two\n", "three\n"):
        (bundle / "app" / "src" / "main.py").write_text(text)
        render(profile, bundle)
    assert tree(bundle / "kept-edits") == {
        "app/src/main.py": b"one\n",
        "app/src/main.py.~2~": b"two\n",
        "app/src/main.py.~3~": b"three\n",
    }


def test_discard_edits_drops_them_and_names_them(rendered: tuple[Path, Path]) -> None:
    profile, bundle = rendered
    (bundle / "app" / "src" / "main.py").write_text("print('my fix')\n")
    (bundle / "app" / "notes.md").write_text("mine\n")

    again = render(profile, bundle, "--discard-edits")
    assert "--discard-edits: dropped 2 of your change(s)" in again.stderr
    assert "  - app/notes.md (added)\n" in again.stderr and "  - app/src/main.py (edited)\n" in again.stderr
    assert not (bundle / "kept-edits").exists() and not (bundle / "app" / "notes.md").exists()
    assert (bundle / "app" / "src" / "main.py").read_text() == "print('main')\n"
    assert "--discard-edits" not in (bundle / "requirements-rebuild.txt").read_text()  # not an input


def test_a_bundle_without_a_record_keeps_whatever_render_would_not_write(
    rendered: tuple[Path, Path],
) -> None:
    """Rendered by an older envbuild: what render wrote is unknown, so nothing differing is dropped."""
    profile, bundle = rendered
    (bundle / RECORD).unlink()
    (profile.parent / "app" / "src" / "main.py").write_text("print('v2')\n")

    again = render(profile, bundle)
    assert "  - app/src/main.py (not as render writes it) -> kept-edits/app/src/main.py" in again.stderr
    assert tree(bundle / "kept-edits") == {"app/src/main.py": b"print('main')\n"}
    assert (bundle / RECORD).is_file()


def test_kept_edits_that_is_not_a_folder_is_refused_changing_nothing(rendered: tuple[Path, Path]) -> None:
    profile, bundle = rendered
    (bundle / "kept-edits").write_text("a file of mine")
    (bundle / "app" / "src" / "main.py").write_text("print('my fix')\n")
    before = tree(bundle)

    result = invoke(["render", str(profile), "--out", str(bundle)])
    assert result.exit_code == 2 and "kept-edits: is not a folder" in result.stderr
    assert tree(bundle) == before
    shutil.rmtree(bundle / "app")  # with nothing to keep, the file is only kept
    render(profile, bundle)
    assert (bundle / "kept-edits").read_text() == "a file of mine"


# ---------------------------------------------------------------- a render killed on its way


KILLED_RENDER = """\
import os, signal, sys
real = os.rename
def rename(src, dst):
    if {when}:
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst)
os.rename = rename
from envbuild.cli import main
sys.argv = ["envbuild", "render", sys.argv[1], "--out", sys.argv[2]]
main()
"""


@pytest.mark.parametrize(
    ("when", "note"),
    [
        # in the middle of moving kept entries into the new tree: the bundle lacks them
        ("'kept-edits' in str(dst)", "put back wheelhouse/a.whl (an interrupted render had moved it"),
        # between the two renames of the swap: no bundle at all, the new tree complete beside it
        ("os.path.basename(src).startswith('.bundle.tmp-')", "finished an interrupted render"),
    ],
    ids=["moving", "swapping"],
)
def test_a_render_killed_on_its_way_hides_nothing(rendered: tuple[Path, Path], when: str, note: str) -> None:
    profile, bundle = rendered
    (bundle / "wheelhouse" / "a.whl").write_bytes(b"fetched")
    (bundle / "notes.txt").write_text("mine\n")
    (bundle / "app" / "src" / "main.py").write_text("print('my fix')\n")
    code = KILLED_RENDER.format(when=when)
    killed = subprocess.run(
        [sys.executable, "-c", code, str(profile), str(bundle)], capture_output=True, text=True, check=False
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    leftovers = [p.name for p in bundle.parent.iterdir() if p.name.startswith(".bundle.")]
    assert any(name.startswith(".bundle.tmp-") for name in leftovers)

    again = render(profile, bundle)
    assert note in again.stderr
    files = tree(bundle)
    assert files["wheelhouse/a.whl"] == b"fetched" and files["notes.txt"] == b"mine\n"
    edited = files.get("kept-edits/app/src/main.py")
    assert edited == b"print('my fix')\n", sorted(files)
    assert files["app/src/main.py"] == b"print('main')\n"
    assert sorted(p.name for p in bundle.parent.iterdir()) == ["bundle", "proj"]  # nothing left beside it
