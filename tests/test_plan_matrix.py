"""Every combination plans without crashing, and plans keep their invariants.

Built-in profiles x every catalog card, and a sweep over torch releases x backends x OSes x Pythons.
"""

from __future__ import annotations

import itertools
import re

import pytest
from plan_support import profile

from envbuild.catalog import load_catalog
from envbuild.models import CheckResult
from envbuild.plan import check
from envbuild.profile import builtin_names, load_profile

CODE = re.compile(r"^(E|W|I)-[A-Z0-9]+(-[A-Z0-9]+)*$")
SEVERITY = {"E": "error", "W": "warning", "I": "info"}


def invariants(result: CheckResult) -> None:
    plan = result.plan
    for f in result.findings:
        assert CODE.match(f.code), f.code
        assert SEVERITY[f.code[0]] == f.severity
        assert f.message.strip() and "\n" not in f.message
    assert result.ok == (not any(f.severity == "error" for f in result.findings))
    assert list(plan.apt) == sorted(set(plan.apt))
    assert plan.index_urls and sum(i.primary for i in plan.index_urls) == 1
    if plan.torch_version:
        torch_pin = plan.pins[0]
        assert torch_pin.name == "torch" and torch_pin.version == plan.torch_version
        assert torch_pin.local == plan.torch_variant
        assert plan.index_urls[0].url.endswith("/" + str(plan.torch_variant))
        names = [p.name for p in plan.pins]
        assert len(names) == len(set(names))
        for pin in plan.pins:
            if pin.name in {"torchvision", "torchaudio"}:
                assert pin.local == plan.torch_variant
    else:
        assert plan.pins == ()
    if plan.backend == "cuda" and plan.base_flavor.startswith("cuda-"):
        assert plan.base_image.startswith("nvidia/cuda:") and plan.base_image.endswith(plan.os)
        assert (plan.base_flavor == "cuda-devel") == plan.compiles
    if plan.backend == "cpu":
        assert plan.base_flavor in {"os", "explicit"} and plan.min_driver is None
    if plan.compiles:
        assert "g++" in plan.apt


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_profiles_on_every_card(name: str) -> None:
    prof = load_profile(name)
    for card in load_catalog().card_ids():
        result = check(prof, targets=[card])
        invariants(result)
        assert [c.id for c in result.plan.targets] == [card]


def test_sweep_releases_backends_os_python() -> None:
    cat = load_catalog()
    versions = [r.series for r in cat.releases] + [r.patch[0].version for r in cat.releases]
    backends = {"cuda": ("h100",), "rocm": ("mi300x",), "cpu": ()}
    seen: set[str] = set()
    for version, (backend, targets), os_id, py in itertools.product(
        versions, backends.items(), [o.id for o in cat.oses], ["3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
    ):
        result = check(profile(backend=backend, targets=targets, torch=version, os=os_id, python=py))
        invariants(result)
        seen |= {f.code for f in result.findings}
    # the sweep reaches both good and bad verdicts
    assert {"E-PYTHON-NO-WHEEL", "E-PYTHON-OS", "E-BASE-UNAVAILABLE", "E-ARCH-MISSING"} <= seen
