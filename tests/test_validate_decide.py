"""Pure decisions on facts (packages, interpreter, OS, compute, extensions, memory, checkpoint)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from validate_support import gpu_lock, locked, torch_fixture

from envbuild.errors import UsageError
from envbuild.models import Lock, LockPackage
from envbuild.report.model import StageResult
from envbuild.validate.decide import decide_interpreter, decide_os, decide_packages, package_differences
from envbuild.validate.decide_work import (
    decide_checkpoint,
    decide_compute,
    decide_extensions,
    decide_memory_cpu,
)
from envbuild.validate.stages import select_stages


def _pkg(name: str, version: str | None, local: str | None = None, req: str | None = None) -> LockPackage:
    text = req or f"{name}=={version}" + (f"+{local}" if local else "")
    return LockPackage(name=name, version=version, local=local, requirement=text, origin="test")


LOCK = gpu_lock(
    "cuda",
    ["h100"],
    packages=(
        _pkg("torch", "2.7.1", "cu128"),
        _pkg("numpy", "2.1.3"),
        _pkg("Flash_Attn", "2.8.3"),
        _pkg("einops", None, req="einops>=0.8"),
    ),
)


def test_package_differences_lists_each_exactly() -> None:
    installed = {"torch": "2.7.1+cpu", "numpy": "2.2.0", "einops": "0.7.0"}
    assert package_differences(LOCK, installed) == [
        "torch: declared 2.7.1+cu128, installed 2.7.1+cpu (wrong variant: cu128 declared, cpu installed)",
        "numpy: declared 2.1.3, installed 2.2.0",
        "Flash_Attn: declared 2.8.3, not installed",
        "einops: declared einops>=0.8, installed 0.7.0",
    ]


def test_matching_environment_has_no_differences() -> None:
    installed = {"torch": "2.7.1+cu128", "numpy": "2.1.3", "flash-attn": "2.8.3", "einops": "0.8.1"}
    assert package_differences(LOCK, installed) == []


def test_broken_requirements_fail_packages() -> None:
    installed = {
        "torch": "2.7.1+cu128",
        "numpy": "2.1.3",
        "flash-attn": "2.8.3",
        "einops": "0.8.1",
        "envbuild": "0.1",
    }
    broken = ["flash-attn 2.8.3 has requirement torch==2.6.0, but you have torch 2.7.1+cu128"]
    res = decide_packages(LOCK, {"installed": installed, "broken": broken, "check_mode": "packaging"})
    assert res.status == "failed"
    assert res.error == "1 package problem: " + broken[0]
    assert res.facts["envbuild_in_target"] is True


INSTALLED = {
    "torch": "2.7.1+cu128",
    "numpy": "2.1.3",
    "flash-attn": "2.8.3",
    "einops": "0.8.1",
    "sympy": "1.14.0",
    "pygobject": "3.42.2",
}
PYGOBJECT = "PyGObject 3.42.2 requires pycairo, which is not installed"
SYMPY = "sympy 1.14.0 requires mpmath, which is not installed"


def test_a_broken_distribution_the_lock_does_not_need_is_a_warning() -> None:
    """A system Python's PyGObject without pycairo says nothing about the locked environment."""
    requires = {"torch": ["sympy", "filelock"], "sympy": ["mpmath"], "pygobject": ["pycairo"]}
    facts = {"installed": INSTALLED, "broken": [PYGOBJECT], "requires": requires, "check_mode": "packaging"}
    res = decide_packages(LOCK, facts)
    assert res.status == "passed", res.error
    assert res.facts["broken"] == [] and res.facts["broken_unlocked"] == [PYGOBJECT]
    assert res.hint is not None and res.hint.endswith(
        "1 broken requirement of distributions the lock neither names nor needs (not failing): " + PYGOBJECT
    )
    # sympy is not named, but torch (named) requires it: its broken requirement fails.
    both = decide_packages(LOCK, {**facts, "broken": [PYGOBJECT, SYMPY]})
    assert both.status == "failed" and both.error == "1 package problem: " + SYMPY
    assert both.facts["broken"] == [SYMPY] and both.facts["broken_unlocked"] == [PYGOBJECT]


def test_without_the_requirement_graph_an_unresolved_lock_fails_every_broken_requirement() -> None:
    res = decide_packages(LOCK, {"installed": INSTALLED, "broken": [PYGOBJECT], "check_mode": "packaging"})
    assert res.status == "failed" and res.facts["broken"] == [PYGOBJECT]
    resolved = replace(RESOLVED, packages=())
    have = {**MATCHING, "pygobject": "3.42.2"}
    ok = decide_packages(resolved, {"installed": have, "broken": [PYGOBJECT], "check_mode": "packaging"})
    assert ok.status == "passed" and ok.facts["broken_unlocked"] == [PYGOBJECT]
    sympy = "sympy 1.14.0 has requirement mpmath<1.4, but you have mpmath 1.4.0"
    bad = decide_packages(resolved, {"installed": have, "broken": [sympy], "check_mode": "packaging"})
    assert bad.status == "failed" and bad.facts["broken"] == [sympy]  # sympy is locked


RESOLVED = gpu_lock(
    "cuda",
    ["h100"],
    packages=(_pkg("torch", "2.7.1", "cu128"), _pkg("numpy", "2.1.3")),
    resolved=True,
    distributions=(
        locked("torch", "2.7.1", "cu128", declared_by=("torch pin",)),
        locked("numpy", "2.1.3", declared_by=("requirements.txt:1",)),
        locked("sympy", "1.14.0", required_by=("torch",)),
        locked("typing-extensions", "4.15.0", required_by=("torch", "pydantic")),
        locked("setuptools", "80.9.0", required_by=("torch",)),
    ),
)
MATCHING = {
    "torch": "2.7.1+cu128",
    "numpy": "2.1.3",
    "sympy": "1.14.0",
    "typing-extensions": "4.15.0",
    "setuptools": "80.9.0",
}


def _packages(lock: Lock, **installed: str | None) -> StageResult:
    """decide_packages on MATCHING changed by ``installed`` (None: not installed)."""
    have = {k: v for k, v in {**MATCHING, **installed}.items() if v is not None}
    return decide_packages(lock, {"installed": have, "broken": [], "check_mode": "packaging"})


def test_resolved_lock_missing_distribution_fails() -> None:
    res = _packages(RESOLVED, numpy=None)
    assert res.status == "failed"
    assert res.facts["missing"] == ["numpy==2.1.3 (declared by requirements.txt:1)"]
    assert res.facts["different"] == [] and res.facts["wrong_variant"] == [] and res.facts["extras"] == []
    assert res.error == "1 package problem: missing (1): numpy==2.1.3 (declared by requirements.txt:1)"
    assert res.hint == (
        "reinstall from the bundle's requirements-rebuild.txt with "
        "`/opt/venv/bin/python -m pip install --require-hashes --no-deps -r requirements-rebuild.txt`, "
        "or rebuild the image; never upgrade by hand"
    )


def test_a_build_dependency_of_a_source_build_is_not_expected_in_the_image() -> None:
    """[python] build_from_source: the sdist's build dependencies (role "build") are used in the builder
    stage only; the distribution built from source (role "source") is installed and compared."""
    ninja = replace(locked("ninja", "1.13.2", required_by=("eb-addop",)), role="build")
    addop = replace(locked("eb-addop", "0.1.0", declared_by=("requirements.txt:2",)), role="source")
    lock = replace(RESOLVED, distributions=(*RESOLVED.distributions, ninja, addop))
    res = _packages(lock, **{"eb-addop": "0.1.0"})
    assert res.status == "passed", res.error
    assert res.facts["locked_count"] == 6 and res.facts["extras"] == []
    missing = _packages(lock)
    assert missing.facts["missing"] == ["eb-addop==0.1.0 (declared by requirements.txt:2)"]


def test_resolved_lock_drift_within_a_declared_range_fails_naming_who_required_it() -> None:
    # torch asks for sympy>=1.13.3: 1.13.3 satisfies it (so pip check is happy) but is not what was locked.
    res = _packages(RESOLVED, sympy="1.13.3", **{"typing-extensions": "4.14.1"})
    assert res.status == "failed"
    assert res.facts["different"] == [
        "sympy 1.13.3 instead of 1.14.0 (required by torch)",
        "typing-extensions 4.14.1 instead of 4.15.0 (required by torch, pydantic)",
    ]
    assert res.error == (
        "2 package problems: different version (2): sympy 1.13.3 instead of 1.14.0 (required by torch), "
        "typing-extensions 4.14.1 instead of 4.15.0 (required by torch, pydantic)"
    )
    assert res.facts["differences"] == [
        "different version: sympy 1.13.3 instead of 1.14.0 (required by torch)",
        "different version: typing-extensions 4.14.1 instead of 4.15.0 (required by torch, pydantic)",
    ]
    assert _packages(RESOLVED, sympy="1.14").status == "passed"  # the same version, spelled shorter


def test_resolved_lock_local_tag_mismatch_is_a_wrong_variant() -> None:
    cpu = _packages(RESOLVED, torch="2.7.1+cpu")
    assert cpu.facts["wrong_variant"] == ["torch 2.7.1+cpu instead of 2.7.1+cu128 (declared by torch pin)"]
    assert cpu.error == (
        "1 package problem: wrong variant (1): torch 2.7.1+cpu instead of 2.7.1+cu128 (declared by torch pin)"
    )
    untagged = _packages(RESOLVED, torch="2.7.1")
    assert untagged.facts["wrong_variant"] == ["torch 2.7.1 instead of 2.7.1+cu128 (declared by torch pin)"]
    tagged = _packages(RESOLVED, numpy="2.1.3+local")  # a tag the lock does not have is wrong too
    assert tagged.facts["wrong_variant"] == [
        "numpy 2.1.3+local instead of 2.1.3 (declared by requirements.txt:1)"
    ]
    both = _packages(RESOLVED, torch="2.6.0+cpu")  # another release: a different version, variant shown
    assert both.facts["different"] == ["torch 2.6.0+cpu instead of 2.7.1+cu128 (declared by torch pin)"]
    assert both.facts["wrong_variant"] == []


def test_resolved_lock_extras_are_listed_but_never_fail() -> None:
    res = _packages(RESOLVED, pip="25.2", wheel="0.45.1", rich="14.1.0")
    assert res.status == "passed" and res.error is None and res.hint is None
    assert res.facts["extras"] == [
        "pip 25.2 (comes with every venv)",
        "rich 14.1.0",
        "wheel 0.45.1 (comes with every venv)",
    ]
    assert res.facts["lock_resolved"] is True and res.facts["compared"] == "distributions"
    assert res.facts["locked_count"] == 5 and "note" not in res.facts
    # setuptools is in this lock, so a different one fails like any other distribution.
    assert _packages(RESOLVED, setuptools="75.0.0").facts["different"] == [
        "setuptools 75.0.0 instead of 80.9.0 (required by torch)"
    ]
    # Alongside a failure the error line names the extras too, saying they do not fail.
    failed = _packages(RESOLVED, pip="25.2", numpy=None)
    assert failed.error == (
        "1 package problem: missing (1): numpy==2.1.3 (declared by requirements.txt:1); "
        "not in the lock, not failing (1): pip 25.2 (comes with every venv)"
    )


def test_resolved_lock_keeps_the_broken_requirements_check() -> None:
    broken = ["torch 2.7.1+cu128 requires filelock, which is not installed"]
    facts = {"installed": MATCHING, "broken": broken, "check_mode": "packaging"}
    res = decide_packages(RESOLVED, facts)
    assert res.status == "failed" and res.facts["broken"] == broken
    assert res.error == "1 package problem: broken requirements (1): " + broken[0]


def test_names_are_compared_canonically() -> None:
    installed = {**MATCHING, "Typing_Extensions": "4.15.0", "NumPy": "2.1.3"}
    del installed["typing-extensions"], installed["numpy"]
    names = {"typing-extensions": "Typing_Extensions", "numpy": "NumPy"}
    res = decide_packages(RESOLVED, {"installed": installed, "names": names, "broken": []})
    assert res.status == "passed", res.error
    assert res.facts["missing"] == [] and res.facts["extras"] == []
    assert res.facts["declared_installed"] == {"torch": "2.7.1+cu128", "numpy": "2.1.3"}
    extra = decide_packages(
        RESOLVED, {"installed": {**MATCHING, "Rich_Text": "1"}, "names": {"rich-text": "Rich_Text"}}
    )
    assert extra.facts["extras"] == ["Rich_Text 1"]  # shown as the distribution spells itself


def test_unresolved_lock_compares_the_declared_requirements_with_a_note() -> None:
    unresolved = replace(RESOLVED, resolved=False)  # distributions ignored
    res = _packages(unresolved, sympy="1.13.3", rich="14.1.0")
    assert res.status == "passed"  # transitive drift is not seen: that is what the note says
    note = (
        "the lock is not resolved: only its declared requirements (2) were compared, transitive "
        "dependencies were not checked (run `envbuild lock BUNDLE` to lock every distribution, then "
        "validate again)"
    )
    assert res.facts["note"] == note and res.hint == note
    assert res.facts["lock_resolved"] is False and res.facts["compared"] == "declared"
    assert not {"missing", "different", "wrong_variant", "extras"} & set(res.facts)
    failed = _packages(unresolved, numpy="2.2.0")
    assert failed.error == "1 package problem: numpy: declared 2.1.3, installed 2.2.0"
    assert failed.hint is not None and failed.hint.endswith("; " + note)


def test_interpreter_fails_only_on_version_and_implementation() -> None:
    ok = {"version": "3.11.9", "implementation": "CPython", "implementation_tag": "cp", "prefix": "/opt/venv"}
    res = decide_interpreter(LOCK, ok)
    assert res.status == "passed" and res.hint is None and res.facts["warnings"] == []
    bad = decide_interpreter(LOCK, {**ok, "version": "3.12.3", "prefix": "/usr"})
    assert bad.error == "Python 3.12.3 is running; the lock declares Python 3.11"
    assert bad.facts["warnings"] == [
        "the lock's interpreter /opt/venv/bin/python runs with prefix /usr, not /opt/venv"
    ]
    assert "python3.11 -m venv venv" in (bad.hint or "") and "--python venv/bin/python" in (bad.hint or "")
    pypy = decide_interpreter(LOCK, {**ok, "implementation": "PyPy", "implementation_tag": "pp"})
    assert pypy.error == "the interpreter is PyPy (pp); the lock's wheels are for CPython (cp)"


def test_a_different_prefix_is_a_warning_not_a_failure() -> None:
    """Inside the image (chosen by the lock) or with --python: the prefix is reported, never failed."""
    facts = {
        "executable": "/srv/job/venv/bin/python",
        "version": "3.11.2",
        "implementation": "CPython",
        "implementation_tag": "cp",
        "prefix": "/srv/job/venv",
        "kind": "venv",
        "on_path": {
            "python": {"path": "/usr/local/bin/python", "is_under_test": False},
            "python3": {"path": "/srv/job/venv/bin/python3", "is_under_test": True},
        },
    }
    res = decide_interpreter(LOCK, facts, "--python")
    assert res.status == "passed"
    assert res.facts["warnings"] == [
        "validating /srv/job/venv/bin/python (prefix /srv/job/venv, chosen by --python), not the lock's "
        "environment /opt/venv (/opt/venv/bin/python is not here)",
        "`python` on PATH: /usr/local/bin, not the interpreter under test",
    ]
    assert res.hint == "; ".join(res.facts["warnings"])
    assert res.facts["chosen_by"] == "--python" and res.facts["lock_prefix"] == "/opt/venv"
    in_image = decide_interpreter(LOCK, {**facts, "on_path": {}})
    assert in_image.status == "passed"
    assert in_image.facts["warnings"] == [
        "the lock's interpreter /opt/venv/bin/python runs with prefix /srv/job/venv, not /opt/venv"
    ]


def test_os_and_glibc() -> None:
    facts = {
        "id": "ubuntu",
        "version_id": "24.04",
        "libc": "glibc",
        "libc_version": "2.39",
        "os_release": "x",
    }
    res = decide_os(LOCK, facts)
    assert res.status == "passed" and "os_release" not in res.facts
    old = decide_os(LOCK, {**facts, "id": "centos", "version_id": "7", "libc_version": "2.17"})
    assert old.error == (
        "OS is centos 7; the lock declares ubuntu 24.04; "
        "glibc 2.17 is older than 2.28, which torch wheels (manylinux_2_28) need"
    )


def test_compute_decisions() -> None:
    good = {
        "device": "cuda:0",
        "dtype": "bfloat16",
        "size": 512,
        "finite": True,
        "rel_error": 0.004,
        "tolerance": 0.03,
        "ok": True,
    }
    assert decide_compute({"checks": [good]}).status == "passed"
    nan = {**good, "finite": False, "rel_error": None, "ok": False}
    assert (
        decide_compute({"checks": [good, nan]}).error
        == "cuda:0 bfloat16 matmul (512x512) produced non-finite values"
    )
    off = {**good, "rel_error": 0.5, "ok": False}
    off_error = "cuda:0 bfloat16 matmul (512x512): relative error 0.5 exceeds 0.03"
    assert decide_compute({"checks": [off]}).error == off_error
    assert decide_compute({"checks": []}).status == "failed"
    # The verdict is re-derived from the numbers, not taken from the probe's "ok".
    lying = {**good, "rel_error": 0.5}
    assert decide_compute({"checks": [lying]}).error == off_error
    assert decide_compute({"checks": [{**good, "rel_error": None}]}).status == "failed"


def test_extension_decisions() -> None:
    failed = {
        "name": "cpp_op",
        "status": "failed",
        "error": "cannot compile: missing ninja",
        "hint": "install ninja",
    }
    res = decide_extensions(LOCK, {"parts": [failed]})
    assert (res.status, res.error, res.hint) == ("failed", "cannot compile: missing ninja", "install ninja")
    skip = decide_extensions(LOCK, {"parts": [{"name": "cpp_op", "status": "skipped", "reason": "off"}]})
    assert skip.status == "skipped" and skip.facts["reason"] == "cpp_op: off"


def test_memory_cpu_decisions() -> None:
    lock = replace(LOCK, gpu_memory_gib=10.0)
    assert decide_memory_cpu(LOCK, 10**12).status == "skipped"
    assert decide_memory_cpu(lock, 20 * 1024**3).status == "passed"
    res = decide_memory_cpu(lock, 4 * 1024**3)
    assert res.error == "host has 4.0 GiB available, the job needs 10.5 GiB (with margin)"


def test_checkpoint_decisions() -> None:
    save = {"path": "/w/c.pt", "size_bytes": 10, "write_seconds": 0.1}
    assert decide_checkpoint(save, {"bitwise_equal": True, "max_abs_diff": 0.0}, "cpu").status == "passed"
    drift = decide_checkpoint(save, {"bitwise_equal": False, "max_abs_diff": 1e-9}, "cpu")
    assert drift.status == "failed"  # bitwise on CPU: any difference fails
    assert (
        decide_checkpoint(save, {"bitwise_equal": False, "max_abs_diff": 1e-7}, "cuda:0").status == "passed"
    )
    assert decide_checkpoint(save, {"bitwise_equal": False, "max_abs_diff": 0.1}, "cuda:0").status == "failed"


def test_stage_selection_adds_prerequisites() -> None:
    with pytest.raises(UsageError, match="--stages: no stage named"):
        select_stages(["", " "])  # `--stages ''` is a mistake, not "every stage"
    assert select_stages(["checkpoint"]) == [
        "interpreter",
        "packages",
        "accelerator",
        "devices",
        "compute",
        "checkpoint",
    ]
    assert select_stages(["os"]) == ["os"]
    with pytest.raises(UsageError, match=r"unknown stage 'gpu' \(valid: accelerator, blender, checkpoint"):
        select_stages(["gpu"])


def test_lock_without_torch_skips_torch_stages(tmp_path: Path) -> None:
    import sys

    from envbuild.validate import run_validation

    lock = gpu_lock(
        "cpu",
        [],
        profile_kind="ubuntu",
        torch_version=None,
        torch_variant=None,
        accelerator_version=None,
        python_executable=sys.executable,
        os="debian12",
        os_release_id="debian",
        os_release_version="12",
    )
    report, _ = run_validation(lock, out=tmp_path / "runs", workdir=tmp_path)
    statuses = {s.stage: s.status for s in report.stages}
    assert statuses["accelerator"] == "skipped"
    assert {statuses[s] for s in ("devices", "compute", "extensions", "memory", "checkpoint")} == {"skipped"}
    assert (
        report.stage("compute").facts["reason"]
        == "the lock declares no torch (profile kind ubuntu): not applicable"
    )
    assert report.ok


def test_gpu_lock_without_torch_uses_the_vendor_tools() -> None:
    from envbuild.validate.gpu import decide_accelerator_without_torch

    lock = gpu_lock("cuda", ["h100"], profile_kind="blender", torch_version=None)
    none = decide_accelerator_without_torch(lock, 0, None, None)
    assert none.error == "cuda lock but the vendor tools see no GPU" and "--gpus all" in (none.hint or "")
    assert decide_accelerator_without_torch(lock, 1, "570.133.20", "NVML").status == "passed"
    assert decide_accelerator_without_torch(lock, 1, "535.104.05", "NVML").status == "failed"


# The lock rendered for the lent H200 pins torch 2.11.0+cu130 (tests/gpu/h200-torch211.toml).
H200_TORCH = LockPackage(
    name="torch", version="2.11.0", local="cu130", requirement="torch==2.11.0+cu130", origin="torch pin"
)


def test_the_recorded_h200s_torch_from_the_package_index_is_its_cu130_build() -> None:
    """Recorded on a lent H200 by scripts/gpu-check.sh (tests/fixtures/torch/README.md): the machine's
    torch family came from the package index; the metadata says 2.11.0, each version.py +cu130.  Before
    the builds were read, the packages stage failed it as a wrong variant."""
    recorded = torch_fixture("h200-torch2.11.0-cu130.recorded.json")["packages"]
    assert recorded["installed"]["torch"] == "2.11.0"
    assert recorded["builds"] == {
        "torch": "2.11.0+cu130",
        "torchaudio": "2.11.0+cu130",
        "torchvision": "0.26.0+cu130",
    }
    lock = replace(LOCK, packages=(H200_TORCH, _pkg("torchvision", "0.26.0", "cu130")))
    facts = {**recorded, "broken": [], "check_mode": "packaging"}
    res = decide_packages(lock, facts)
    assert res.status == "passed", res.error
    assert res.facts["builds"] == recorded["builds"]
    before = decide_packages(lock, {**facts, "builds": {}})
    assert before.facts["differences"] == [
        "torch: declared 2.11.0+cu130, installed 2.11.0 "
        "(wrong variant: cu130 declared, no local tag installed)",
        "torchvision: declared 0.26.0+cu130, installed 0.26.0 "
        "(wrong variant: cu130 declared, no local tag installed)",
    ]


def test_the_default_build_without_a_local_tag_is_read_from_its_version_file() -> None:
    lock = replace(LOCK, packages=(H200_TORCH,))
    built = {"torch": "2.11.0+cu130"}
    assert package_differences(lock, {"torch": "2.11.0"}, built) == []
    assert package_differences(lock, {"torch": "2.11.0"}) == [  # no build read: the tag is unknown
        "torch: declared 2.11.0+cu130, installed 2.11.0 "
        "(wrong variant: cu130 declared, no local tag installed)"
    ]
    assert package_differences(lock, {"torch": "2.11.0"}, {"torch": "2.11.0+cpu"}) == [
        "torch: declared 2.11.0+cu130, installed 2.11.0 (its build 2.11.0+cpu, from torch/version.py) "
        "(wrong variant: cu130 declared, cpu installed)"
    ]
    # the metadata's own tag comes first; a build of another release names nothing
    assert package_differences(lock, {"torch": "2.11.0+cpu"}, built) == [
        "torch: declared 2.11.0+cu130, installed 2.11.0+cpu (wrong variant: cu130 declared, cpu installed)"
    ]
    assert package_differences(lock, {"torch": "2.11.0"}, {"torch": "2.10.0+cu130"})[0].endswith(
        "(wrong variant: cu130 declared, no local tag installed)"
    )


def test_a_resolved_lock_accepts_the_default_build_of_its_variant() -> None:
    lock = replace(RESOLVED, distributions=(locked("torch", "2.11.0", "cu130", declared_by=("torch pin",)),))
    facts = {"installed": {"torch": "2.11.0"}, "broken": [], "check_mode": "packaging"}
    assert decide_packages(lock, {**facts, "builds": {"torch": "2.11.0+cu130"}}).status == "passed"
    res = decide_packages(lock, {**facts, "builds": {"torch": "2.11.0+cu128"}})
    assert res.facts["wrong_variant"] == [
        "torch 2.11.0 (its build 2.11.0+cu128, from torch/version.py) instead of 2.11.0+cu130 "
        "(declared by torch pin)"
    ]
    # a lock of the package index's default build (no tag) takes the metadata as it is
    untagged = replace(RESOLVED, distributions=(locked("torch", "2.11.0", declared_by=("torch pin",)),))
    assert decide_packages(untagged, {**facts, "builds": {"torch": "2.11.0+cu130"}}).status == "passed"
