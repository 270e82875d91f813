"""Every rendered Dockerfile passes hadolint with no finding at all and parses with BuildKit's parser.

Covers the hand-built plans (every backend, Python provisioning and Blender) and every golden
bundle's Dockerfile (the built-in profiles on their targets).  Rules that are ignored are ignored
inline in the template, each with its justification.
"""

from __future__ import annotations

from pathlib import Path

import dockerfile
import pytest
from render_support import BLENDER, cpu_plan, cuda_plan, hadolint, rocm_plan

from envbuild.models import Plan
from envbuild.render import render_dockerfile

GOLDEN = Path(__file__).parent / "golden"

PLANS: dict[str, Plan] = {
    "cuda-runtime": cuda_plan(),
    "cuda-devel-compiles": cuda_plan(compiles=True, base_flavor="cuda-devel"),
    "cuda-blender": cuda_plan(**BLENDER),
    "rocm-deadsnakes": rocm_plan(),
    "cpu-debian": cpu_plan(),
    "base-image-python": cuda_plan(
        python_provision="base-image", base_flavor="explicit", base_image="my/img:1"
    ),
}


def golden_dockerfiles() -> list[Path]:
    return sorted(GOLDEN.glob("*/Dockerfile"))


@pytest.mark.parametrize("name", sorted(PLANS))
def test_hand_built_plans_lint_clean(name: str) -> None:
    text = render_dockerfile(PLANS[name])
    assert hadolint(text) == []
    assert dockerfile.parse_string(text)


def test_hadolint_really_reports() -> None:
    """Guard against a linter that passes everything: a known-bad Dockerfile must be flagged."""
    codes = {f["code"] for f in hadolint("FROM debian\nRUN apt-get install -y curl\n")}
    assert {"DL3006", "DL3008", "DL3015"} <= codes


@pytest.mark.parametrize("path", golden_dockerfiles(), ids=lambda p: p.parent.name)
def test_golden_dockerfiles_lint_clean(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert hadolint(text) == []
    parsed = dockerfile.parse_string(text)
    assert parsed[0].cmd == "ARG" and parsed[0].value[0].startswith("BASE_IMAGE=")


def test_there_are_golden_dockerfiles() -> None:
    assert len(golden_dockerfiles()) >= 8


def test_every_builtin_on_every_card_lints_clean() -> None:
    """Not just the goldens: every built-in x every catalog card (forced when incompatible)."""
    from envbuild.catalog import load_catalog
    from envbuild.plan import check
    from envbuild.profile import builtin_names, load_profile
    from envbuild.render import render_files

    failures = []
    seen = set()
    for name in builtin_names():
        profile = load_profile(name)
        for card in load_catalog().card_ids():
            result = check(profile, targets=[card])
            files, _ = render_files(result, f"envbuild render {name} --target {card}")
            text = files["Dockerfile"].decode()
            seen.add("\n".join(line for line in text.splitlines() if not line.startswith("# Regenerate:")))
            dockerfile.parse_string(text)
            findings = hadolint(text)
            if findings:
                failures.append(f"{name} x {card}: {findings}")
    assert not failures, "\n".join(failures)
    assert len(seen) >= len(builtin_names())  # each built-in renders its own Dockerfile
