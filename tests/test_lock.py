"""``envbuild lock`` and ``envbuild check --resolve`` against real loopback indexes (tests/index_support.py).

Every bundle here is rendered from a small custom profile written in ``tmp_path``, then locked with
``--index-url`` pointing at the served standard universe (fakedep, leftpad/rightpad, flashlike,
plainsrc on the main index; torchlike 2.13.0+cpu and +cu128 on their own indexes).  Hashes are
computed from the files the universe built, never copied from an expected output.  Nothing leaves
127.0.0.1: subprocesses run without PIP_*/UV_* settings and without the machine's pip config.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from index_support import IndexTree, IndexURLs, sha256_of
from lock_support import LOCK, REQUIREMENTS, envbuild, read_lock, render, write_profile

from envbuild.boundary import to_data

# ---------------------------------------------------------------- helpers


@pytest.fixture
def in_process(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """For the Python API in this process: the same uv cache and proxy exemption as the subprocesses."""
    for key in ("UV_CACHE_DIR", "NO_PROXY", "no_proxy"):
        monkeypatch.setenv(key, env[key])


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def block(requirements: str, spec: str) -> str:
    """The requirement ``spec`` with its continuation lines (hashes, ``# via``), as written."""
    match = re.search(rf"^{re.escape(spec)} \\\n(?:    .*\n)+", requirements, re.M)
    assert match, f"{spec} not pinned in:\n{requirements}"
    return match.group(0)


def pinned(requirements: str) -> list[str]:
    """Every ``name==version`` line of a requirements file (options and comments left out)."""
    return [line.split(" ", 1)[0] for line in requirements.splitlines() if re.match(r"^[a-z0-9].*==", line)]


# ---------------------------------------------------------------- 1. a plain lock


def test_lock_pins_every_distribution_with_the_hash_of_its_file(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    bundle = render(env, tmp_path, "plain", ["torchlike==2.13.0+cpu"])
    done = envbuild(env, "lock", bundle, "--index-url", urls.main, "--index-url", urls.cpu)
    assert done.returncode == 0, done.stderr

    cpu_sha = sha256_of(tree.files["torchlike-2.13.0+cpu"])
    fakedep_sha = sha256_of(tree.files["fakedep-1.1"])
    lock = read_lock(bundle)
    assert lock["resolved"] is True
    assert {(d["name"], d["version"], d["local"]) for d in lock["distributions"]} == {
        ("torchlike", "2.13.0", "cpu"),
        ("fakedep", "1.1", None),
    }
    dists = {d["name"]: d for d in lock["distributions"]}
    assert [f["sha256"] for f in dists["torchlike"]["files"]] == [cpu_sha]
    assert [f["filename"] for f in dists["torchlike"]["files"]] == ["torchlike-2.13.0+cpu-py3-none-any.whl"]
    assert [f["sha256"] for f in dists["fakedep"]["files"]] == [fakedep_sha]
    assert dists["torchlike"]["declared_by"] == ["profile:python.packages[0]"]
    assert dists["torchlike"]["index"] == urls.cpu
    assert dists["fakedep"]["required_by"] == ["torchlike"]
    assert dists["fakedep"]["index"] == urls.main
    resolution = lock["resolution"]
    assert resolution["index_urls"] == [urls.main, urls.cpu]
    assert resolution["indexes_from"] == "command line"
    assert resolution["find_links"] == []
    assert (resolution["python_version"], resolution["platform"]) == ("3.11", "x86_64-manylinux_2_36")

    text = (bundle / REQUIREMENTS).read_text(encoding="utf-8")
    assert sorted(pinned(text)) == ["fakedep==1.1", "torchlike==2.13.0+cpu"]
    assert block(text, "torchlike==2.13.0+cpu") == (
        f"torchlike==2.13.0+cpu \\\n    --hash=sha256:{cpu_sha}\n    # via profile:python.packages[0]\n"
    )
    assert block(text, "fakedep==1.1") == (
        f"fakedep==1.1 \\\n    --hash=sha256:{fakedep_sha}\n    # via torchlike\n"
    )
    lines = text.splitlines()
    for option in (
        "--require-hashes",
        "--only-binary :all:",
        f"--index-url {urls.main}",
        f"--extra-index-url {urls.cpu}",
    ):
        assert option in lines, option
    assert f"# index (command line): {urls.main}" in lines
    assert f"# extra index (command line): {urls.cpu}" in lines
    assert f"# profile: plain, sha256 {lock['profile_sha256']}" in lines
    assert "locked 2 distributions" in done.stdout


# ---------------------------------------------------------------- 2. the variant's file, enforced by pip


def test_lock_takes_the_requested_variant_and_pip_refuses_the_other(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    bundle = render(env, tmp_path, "variant", ["torchlike==2.13.0+cu128"])
    done = envbuild(
        env, "lock", bundle, "--index-url", urls.main, "--index-url", urls.cpu, "--index-url", urls.cu128
    )
    assert done.returncode == 0, done.stderr
    cpu_wheel, cu128_wheel = tree.files["torchlike-2.13.0+cpu"], tree.files["torchlike-2.13.0+cu128"]
    cu128_sha, cpu_sha = sha256_of(cu128_wheel), sha256_of(cpu_wheel)
    assert cu128_sha != cpu_sha
    text = (bundle / REQUIREMENTS).read_text(encoding="utf-8")
    torch_block = block(text, "torchlike==2.13.0+cu128")
    assert f"--hash=sha256:{cu128_sha}" in torch_block
    assert cpu_sha not in text and "+cpu" not in text
    dists = {d["name"]: d for d in read_lock(bundle)["distributions"]}
    assert dists["torchlike"]["local"] == "cu128"
    assert dists["torchlike"]["index"] == urls.cu128

    # pip in hash-checking mode, given only the locked torchlike line, against a folder holding the
    # cpu wheel's bytes under the cu128 wheel's file name: refused.  The real cu128 wheel installs.
    requirements = tmp_path / "torchlike-only.txt"
    requirements.write_text(torch_block, encoding="utf-8")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=env)
    python = venv / "bin" / "python"

    def pip_install(folder: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                *(sys.executable, "-m", "pip", "--python", str(python), "install"),
                *("--require-hashes", "--no-deps", "--no-index", "--find-links", str(folder)),
                *("-r", str(requirements)),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    impostor = tmp_path / "impostor"
    impostor.mkdir()
    (impostor / cu128_wheel.name).write_bytes(cpu_wheel.read_bytes())
    refused = pip_install(impostor)
    assert refused.returncode == 1, refused.stdout + refused.stderr  # pip's error status
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.stdout + refused.stderr
    assert cpu_sha in refused.stdout + refused.stderr  # pip names the hash it got
    assert not list(venv.glob("lib/python*/site-packages/torchlike*"))

    genuine = tmp_path / "genuine"
    genuine.mkdir()
    shutil.copyfile(cu128_wheel, genuine / cu128_wheel.name)
    accepted = pip_install(genuine)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    version = subprocess.run(
        [str(python), "-c", "import torchlike; print(torchlike.__version__)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert version.stdout.strip() == "2.13.0+cu128"


# ---------------------------------------------------------------- 3. conflicts


def test_lock_conflict_names_the_requirements_and_writes_nothing(
    tmp_path: Path, urls: IndexURLs, env: dict[str, str]
) -> None:
    bundle = render(env, tmp_path, "conflict", ["leftpad", "rightpad"])
    before = snapshot(bundle)
    done = envbuild(env, "lock", bundle, "--index-url", urls.main)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: E-REQ-CONFLICT:" in done.stdout
    assert "leftpad (profile:python.packages[0]: leftpad)" in done.stdout
    assert "rightpad (profile:python.packages[1]: rightpad)" in done.stdout
    assert "nothing written" in done.stderr
    assert "Traceback" not in done.stderr
    assert snapshot(bundle) == before  # both files byte-identical, no .part file left behind
    assert read_lock(bundle)["resolved"] is False


def test_lock_conflict_between_the_profile_and_its_requirements_file(
    tmp_path: Path, urls: IndexURLs, env: dict[str, str]
) -> None:
    """The issue's case: a pin in the profile, a range in a requirements file that excludes it.

    ``check`` already refuses it from the declared lines alone (no index); a bundle forced past that
    is refused again by the resolver, naming both origins, and nothing is written.
    """
    requirements = "# pinned by an old experiment\nfakedep<1.1\n"
    profile = write_profile(tmp_path / "checked-profile", "checked", ["fakedep==1.1"], requirements)
    checked = envbuild(env, "check", profile, "--json")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    (message,) = [
        f["message"] for f in json.loads(checked.stdout)["findings"] if f["code"] == "E-REQ-CONFLICT"
    ]
    assert message.startswith("fakedep: profile:python.packages[0] pins 'fakedep==1.1' but ")
    assert "requirements.txt:2 asks for 'fakedep<1.1'" in message
    bundle = render(env, tmp_path, "user", ["fakedep==1.1"], requirements=requirements, force=True)
    before = snapshot(bundle)
    done = envbuild(env, "lock", bundle, "--index-url", urls.main)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: E-REQ-CONFLICT:" in done.stdout
    assert "profile:python.packages[0]: fakedep==1.1" in done.stdout
    assert "requirements.txt:2: fakedep<1.1" in done.stdout
    assert snapshot(bundle) == before


# ---------------------------------------------------------------- 4. source-only distributions


@pytest.mark.parametrize(
    ("package", "code", "expected"),
    [
        pytest.param(
            "flashlike==2.8.3",
            "E-SOURCE-NEEDS-TORCH",
            [
                "flashlike 2.8.3 (profile:python.packages[0]: flashlike==2.8.3)",
                "setup.py imports torch",
                '`[python] build_from_source = ["flashlike"]`',
                "a prebuilt wheel",
                "flashlike @ https://",
                "cp311",
            ],
            id="flashlike-needs-torch",
        ),
        pytest.param(
            "plainsrc",
            "E-SOURCE-ONLY",
            [
                "plainsrc 0.1 (profile:python.packages[0]: plainsrc)",
                "only a source distribution",
                "--only-binary :all:",
            ],
            id="plainsrc",
        ),
    ],
)
def test_lock_refuses_a_source_only_distribution(
    tmp_path: Path, urls: IndexURLs, env: dict[str, str], package: str, code: str, expected: list[str]
) -> None:
    bundle = render(env, tmp_path, "source", [package])
    before = snapshot(bundle)
    done = envbuild(env, "lock", bundle, "--index-url", urls.main, "--index-url", urls.cpu)
    assert done.returncode == 1, done.stdout + done.stderr
    codes = re.findall(r"^error: ([A-Z0-9-]+):", done.stdout, re.M)
    assert codes == [code], done.stdout
    for text in expected:
        assert text in done.stdout, text
    # --only-binary :all: keeps uv from building the sdist (setuptools is on the index): no build ran
    assert "Failed to build" not in done.stderr and "Traceback" not in done.stderr
    assert snapshot(bundle) == before


# ---------------------------------------------------------------- 5. determinism


@pytest.mark.usefixtures("in_process")
def test_lock_twice_gives_identical_bytes_in_any_folder(
    tmp_path: Path, urls: IndexURLs, env: dict[str, str]
) -> None:
    from envbuild.lock import lock_bundle

    bundle = render(env, tmp_path, "twice", ["torchlike==2.13.0+cpu", "leftpad"])
    elsewhere = tmp_path / "elsewhere" / "copy"
    shutil.copytree(bundle, elsewhere)
    indexes = ("--index-url", urls.main, "--index-url", urls.cpu)
    assert envbuild(env, "lock", bundle, *indexes).returncode == 0
    first = {name: (bundle / name).read_bytes() for name in (REQUIREMENTS, LOCK)}
    assert b"fakedep==1.0" in first[REQUIREMENTS]  # leftpad holds fakedep below 1.1

    # again through the Python API, in this process, on the locked bundle
    outcome = lock_bundle(bundle, index_urls=(urls.main, urls.cpu))
    assert outcome.lock is not None and outcome.resolved.ok
    assert {name: (bundle / name).read_bytes() for name in (REQUIREMENTS, LOCK)} == first

    # and the copy in another folder, through the CLI
    assert envbuild(env, "lock", elsewhere, *indexes).returncode == 0
    assert {name: (elsewhere / name).read_bytes() for name in (REQUIREMENTS, LOCK)} == first
    for data in first.values():
        assert str(tmp_path).encode() not in data  # no folder of this machine is recorded


# ---------------------------------------------------------------- 6. hash-locked input


def test_hash_locked_requirements_file_is_accepted_and_kept(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    sha = sha256_of(tree.files["fakedep-1.1"])
    other = sha256_of(tree.files["fakedep-1.0"])
    # Hand-written in the shape of `pip-compile --generate-hashes` output (not recorded from the tool):
    # a pin, a backslash, one --hash per line (here the real file's sha256 and another one), a `# via`.
    requirements = (
        "#\n# This file is autogenerated by pip-compile with Python 3.11\n#\n"
        "fakedep==1.1 \\\n"
        f"    --hash=sha256:{other} \\\n"
        f"    --hash=sha256:{sha}\n"
        "    # via -r requirements.in\n"
    )
    # next to it, a profile package without hashes (the torch family is never in the hashed file)
    profile = write_profile(
        tmp_path / "hashed-profile", "hashed", ["torchlike==2.13.0+cpu"], requirements=requirements
    )
    indexes = ("--index-url", urls.main, "--index-url", urls.cpu)
    checked = envbuild(env, "check", profile, "--resolve", *indexes, "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    result = json.loads(checked.stdout)
    assert [f for f in result["findings"] if f["severity"] == "error"] == []  # no E-HASH-MODE
    codes = [f["code"] for f in result["findings"]]
    assert "I-RESOLVED" in codes and "E-HASH-MODE" not in codes

    bundle = tmp_path / "hashed-bundle"
    assert envbuild(env, "render", profile, "--out", bundle).returncode == 0
    done = envbuild(env, "lock", bundle, *indexes)
    assert done.returncode == 0, done.stderr
    text = (bundle / REQUIREMENTS).read_text(encoding="utf-8")
    assert sorted(pinned(text)) == ["fakedep==1.1", "torchlike==2.13.0+cpu"]
    assert block(text, "fakedep==1.1") == (
        f"fakedep==1.1 \\\n    --hash=sha256:{sha}\n    # via requirements.txt:4, torchlike\n"
    )
    cpu_sha = sha256_of(tree.files["torchlike-2.13.0+cpu"])
    assert f"--hash=sha256:{cpu_sha}" in block(text, "torchlike==2.13.0+cpu")
    lock = read_lock(bundle)
    (declared,) = [d for d in lock["declared"] if d["kind"] == "requirement" and d["name"] == "fakedep"]
    assert declared["origin"] == "requirements.txt:4"
    assert sorted(declared["hashes"]) == sorted([f"sha256:{sha}", f"sha256:{other}"])
    dists = {d["name"]: d for d in lock["distributions"]}
    assert [f["sha256"] for f in dists["fakedep"]["files"]] == [sha]


def test_hash_locked_input_with_a_wrong_hash_is_e_req_hash(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    sha = sha256_of(tree.files["fakedep-1.1"])
    wrong = sha256_of(tree.files["fakedep-1.0"])  # another file's sha256: the 1.0 wheel's
    # hand-written, pip-compile --generate-hashes style
    bundle = render(env, tmp_path, "badhash", requirements=f"fakedep==1.1 \\\n    --hash=sha256:{wrong}\n")
    before = snapshot(bundle)
    done = envbuild(env, "lock", bundle, "--index-url", urls.main)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.findall(r"^error: ([A-Z0-9-]+):", done.stdout, re.M) == ["E-REQ-HASH"]
    assert "requirements.txt:1: fakedep==1.1" in done.stdout
    assert f"fakedep-1.1-py3-none-any.whl (sha256:{sha})" in done.stdout
    assert snapshot(bundle) == before


# ---------------------------------------------------------------- 7. check --resolve


def test_check_resolve_reports_findings_and_writes_nothing(
    tmp_path: Path, urls: IndexURLs, env: dict[str, str]
) -> None:
    cwd = tmp_path / "work"
    bad = write_profile(cwd / "bad", "bad", ["leftpad", "rightpad"])
    good = write_profile(cwd / "good", "good", ["torchlike==2.13.0+cpu"])
    before = snapshot(cwd)

    refused = envbuild(env, "check", bad, "--resolve", "--index-url", urls.main, "--json", cwd=cwd)
    assert refused.returncode == 1, refused.stderr
    result = json.loads(refused.stdout)
    assert result["ok"] is False
    (conflict,) = [f for f in result["findings"] if f["code"] == "E-REQ-CONFLICT"]
    assert conflict["severity"] == "error"
    assert "leftpad (profile:python.packages[0]: leftpad)" in conflict["message"]
    assert "rightpad (profile:python.packages[1]: rightpad)" in conflict["message"]
    assert "I-RESOLVED" not in [f["code"] for f in result["findings"]]

    indexes = ("--index-url", urls.main, "--index-url", urls.cpu)
    passed = envbuild(env, "check", good, "--resolve", *indexes, "--json", cwd=cwd)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    result = json.loads(passed.stdout)
    assert result["ok"] is True
    (resolved,) = [f for f in result["findings"] if f["code"] == "I-RESOLVED"]
    assert resolved["severity"] == "info"
    assert resolved["message"].startswith("2 distributions resolve for x86_64-manylinux_2_36 (CPython 3.11)")

    human = envbuild(env, "check", good, "--resolve", *indexes, cwd=cwd)
    assert human.returncode == 0 and "I-RESOLVED" in human.stdout
    assert snapshot(cwd) == before  # nothing written where it ran, nor beside the profiles


@pytest.mark.usefixtures("in_process")
def test_resolve_plan_agrees_with_the_lock(tmp_path: Path, urls: IndexURLs, env: dict[str, str]) -> None:
    from envbuild.lock import resolve_plan
    from envbuild.plan import check
    from envbuild.profile import load_profile

    profile = write_profile(tmp_path / "api", "api", ["torchlike==2.13.0+cpu"])
    resolved = resolve_plan(check(load_profile(str(profile))).plan, index_urls=(urls.main, urls.cpu))
    assert resolved.ok and resolved.findings == ()
    bundle = render(env, tmp_path, "api", ["torchlike==2.13.0+cpu"])
    assert envbuild(env, "lock", bundle, "--index-url", urls.main, "--index-url", urls.cpu).returncode == 0
    assert [to_data(d) for d in resolved.distributions] == read_lock(bundle)["distributions"]
    assert to_data(resolved.resolution) == read_lock(bundle)["resolution"]


# ---------------------------------------------------------------- 8. an unreachable index


def test_unreachable_index_is_a_clear_error(tmp_path: Path, env: dict[str, str]) -> None:
    bundle = render(env, tmp_path, "offline", ["fakedep"])
    before = snapshot(bundle)
    dead = "http://127.0.0.1:9/simple/"  # the discard port: nothing listens there
    # UV_HTTP_RETRIES is one of the uv network settings envbuild passes through; no retry backoff here
    done = envbuild({**env, "UV_HTTP_RETRIES": "0"}, "lock", bundle, "--index-url", dead)
    assert done.returncode == 3, done.stdout + done.stderr  # a network error, not the input
    assert f"the resolver could not read an index ({dead})" in done.stderr
    assert "--index-url" in done.stderr and "--find-links" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert snapshot(bundle) == before


# ---------------------------------------------------------------- 9. --find-links


def test_find_links_folder_supplies_a_wheel_recorded_by_name_and_hash(
    tmp_path: Path, tree: IndexTree, urls: IndexURLs, env: dict[str, str]
) -> None:
    bundle = render(env, tmp_path, "links", ["torchlike==2.13.0+cpu"])
    done = envbuild(env, "lock", bundle, "--index-url", urls.main, "--find-links", tree.cpu)
    assert done.returncode == 0, done.stderr
    lock = read_lock(bundle)
    assert lock["resolution"]["index_urls"] == [urls.main]
    assert lock["resolution"]["find_links"] == []  # the folder is not recorded ...
    assert lock["resolution"]["find_links_folders"] == 1
    dists = {d["name"]: d for d in lock["distributions"]}
    # ... the file taken from it is, by name and sha256
    assert dists["torchlike"]["files"] == [
        {
            "filename": "torchlike-2.13.0+cpu-py3-none-any.whl",
            "url": "",
            "sha256": sha256_of(tree.files["torchlike-2.13.0+cpu"]),
            "size": None,
        }
    ]
    assert dists["torchlike"]["index"] == "a local --find-links folder"
    assert dists["fakedep"]["files"][0]["url"].startswith(urls.main.removesuffix("simple/"))
    text = (bundle / REQUIREMENTS).read_text(encoding="utf-8")
    for data in (text, (bundle / LOCK).read_text(encoding="utf-8")):
        assert str(tree.root) not in data and "file://" not in data  # no path of this machine
    lines = text.splitlines()
    assert "# find-links: 1 local folder(s), not recorded (their files are, below)" in lines
    assert (
        "# Install route: the bundle's wheelhouse. 1 distribution(s) came from a local --find-links folder,"
        in lines
    )
    assert "#   torchlike==2.13.0+cpu" in lines
    assert not [line for line in lines if line.startswith("--find-links")]
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    assert (
        "Route: **the wheelhouse**. `torchlike==2.13.0+cpu` came from a local `--find-links` folder" in readme
    )
    assert "--no-index --find-links wheelhouse" in readme


def test_missing_find_links_folder_is_a_usage_error(
    tmp_path: Path, urls: IndexURLs, env: dict[str, str]
) -> None:
    bundle = render(env, tmp_path, "nolinks", ["fakedep"])
    before = snapshot(bundle)
    missing = tmp_path / "no-such-wheels"
    done = envbuild(env, "lock", bundle, "--index-url", urls.main, "--find-links", missing)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--find-links {missing}: not a folder" in done.stderr
    assert snapshot(bundle) == before
