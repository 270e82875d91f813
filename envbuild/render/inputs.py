"""``envbuild.inputs.json``: what a bundle was rendered from, and the plan derived from it again.

``render`` writes it beside the lock; ``lock`` reads it to derive the plan again from the resolved set
(:func:`check_inputs`), and a re-render compares it with its own inputs to decide whether a resolved
lock still holds.  A bundle rendered before this file existed has none: :func:`read_inputs` returns None.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from envbuild.boundary import InvalidData, parse_json, to_data
from envbuild.errors import BundleError
from envbuild.models import INPUTS_FILE, BundleInputs, CheckResult, Plan


def inputs_of(
    plan: Plan,
    command: str,
    *,
    targets: tuple[str, ...] | None = None,
    bake: bool = False,
    driver: str | None = None,
) -> BundleInputs:
    """The inputs of a render of ``plan`` (the profile as loaded, without its folder on this machine)."""
    profile = replace(plan.profile, folder=None)
    return BundleInputs(
        profile=profile,
        targets=targets,
        driver=driver,
        days=plan.days,
        prices=plan.prices,
        apt_recorded=plan.apt_recorded,
        command=command,
        bake=bake,
    )


def inputs_json(inputs: BundleInputs) -> str:
    """Sorted keys, indent 2, LF, trailing newline: equal inputs give equal bytes."""
    return json.dumps(to_data(inputs), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def read_inputs(bundle: Path) -> BundleInputs | None:
    """The bundle's inputs, or None when it has none (rendered by an older envbuild)."""
    path = bundle / INPUTS_FILE
    if not path.is_file():
        return None
    try:
        return parse_json(BundleInputs, path.read_bytes())
    except (OSError, InvalidData) as exc:
        raise BundleError(f"{path}: {exc}; render the bundle again") from None


def check_inputs(inputs: BundleInputs, **kwargs: object) -> CheckResult:
    """The plan of ``inputs`` derived again (``kwargs`` go to :func:`envbuild.plan.check`)."""
    from envbuild.plan import check

    result = check(inputs.profile, targets=inputs.targets, driver=inputs.driver, **kwargs)  # type: ignore[arg-type]
    plan = replace(result.plan, days=inputs.days, prices=inputs.prices, apt_recorded=inputs.apt_recorded)
    return replace(result, plan=plan)
