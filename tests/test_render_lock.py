"""make_lock: the declared environment the validator compares the machine with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from render_support import B200, CPU, H100, cuda_plan, profile, req

from envbuild import __version__
from envbuild.errors import BundleError
from envbuild.models import LOCK_FORMAT, PYTHON_IN_IMAGE, lock_json, read_lock
from envbuild.render import make_lock


def test_lock_records_the_plan() -> None:
    lock = make_lock(cuda_plan(targets=(H100, B200)))
    assert lock.format == LOCK_FORMAT
    assert lock.envbuild_version == __version__
    assert (lock.os, lock.os_release_id, lock.os_release_version) == ("ubuntu24.04", "ubuntu", "24.04")
    assert lock.python_version == "3.12" and lock.python_executable == PYTHON_IN_IMAGE
    assert (lock.backend, lock.accelerator_version) == ("cuda", "12.8")
    assert (lock.torch_version, lock.torch_variant) == ("2.7.1", "cu128")
    assert lock.required_archs == ("sm_90",) and lock.torch_arch_list[-1] == "sm_120+PTX"
    assert lock.min_driver == "570.124.06"
    assert [(t.id, t.cards_per_lot, t.arch) for t in lock.targets] == [
        ("h100", 1, "sm_90"),
        ("b200", 2, "sm_100"),
    ]
    assert lock.checks[0].name == "pilot" and lock.checks[0].run == ("python", "src/pilot.py")
    assert lock.env == {"HF_HOME": "/workspace/.cache/hf"}
    assert lock.sources == {"base.os": "default", "python.version": "profile:train.toml"}


def test_packages_pins_first_then_user_exact_versions() -> None:
    plan = cuda_plan(
        requirements=(
            req("numpy==2.1.3", "p:0", name="numpy"),
            req("transformers>=4.40", "p:1", name="transformers"),
            req("Foo_Bar===1.0", "p:2", name="foo-bar"),
            req("wheelpkg @ https://x.org/wheelpkg-3.2.1-py3-none-any.whl", "p:3", name="wheelpkg"),
            req("gitpkg @ git+https://x.org/g.git@v1", "p:4", name="gitpkg"),
            req("localpkg==1.0+abc", "p:5", name="localpkg"),
            req("star==1.*", "p:6", name="star"),
            req("numpy", "p:7", name="numpy"),
        )
    )
    packages = make_lock(plan).packages
    assert [(p.name, p.version, p.local) for p in packages] == [
        ("torch", "2.7.1", "cu128"),
        ("torchvision", "0.22.1", "cu128"),
        ("triton", "3.3.1", None),
        ("numpy", "2.1.3", None),
        ("transformers", None, None),
        ("foo-bar", "1.0", None),
        ("wheelpkg", "3.2.1", None),
        ("gitpkg", None, None),
        ("localpkg", "1.0", "abc"),
        ("star", None, None),
    ]
    assert packages[0].requirement == "torch==2.7.1+cu128"
    assert packages[3].origin == "p:0"


def test_cpu_plan_and_debian() -> None:
    lock = make_lock(cuda_plan(targets=(CPU,), os="debian12", backend="cpu", min_driver=None))
    assert (lock.os_release_id, lock.os_release_version) == ("debian", "12")
    assert lock.targets[0].vendor == "cpu" and lock.min_driver is None


def test_secret_looking_env_is_refused() -> None:
    plan = cuda_plan(profile=profile(env={"HF_TOKEN": "hf_abc"}))
    with pytest.raises(BundleError, match=r"env\.HF_TOKEN"):
        make_lock(plan)


def test_lock_json_is_sorted_and_round_trips(tmp_path: Path) -> None:
    text = lock_json(make_lock(cuda_plan()))
    assert text.endswith("}\n") and "\r" not in text
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert text == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    path = tmp_path / "envbuild.lock.json"
    path.write_text(text, encoding="utf-8")
    assert read_lock(path) == make_lock(cuda_plan())


def test_lock_apt_is_what_the_final_stage_installs() -> None:
    lock = make_lock(cuda_plan(apt=("git", "python3-venv", "curl=7.88.1-10+deb12u8")))
    assert lock.apt == ("ca-certificates", "curl=7.88.1-10+deb12u8", "git", "python3.12")
