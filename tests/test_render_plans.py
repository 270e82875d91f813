"""The hand-built plans of tests/render_support.py are consistent models: a change in ``envbuild.models``
shows up here first."""

from __future__ import annotations

from render_support import cuda_plan, result

from envbuild.models import Finding


def test_sample_plans_are_valid_models() -> None:
    plan = cuda_plan()
    assert plan.pins[0].spec == "torch==2.7.1+cu128"
    assert plan.profile.checks[0].name == "pilot"
    assert result(plan).ok
    assert not result(plan, Finding(severity="error", code="E-X", message="bad")).ok
