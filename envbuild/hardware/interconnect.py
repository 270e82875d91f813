"""The interconnect rules: NVLink links and the NVSwitch fabric, judged where GPUs talk to each other.

With one GPU visible nothing travels over NVLink between GPUs.  A GPU passed through alone from an HGX
board may show its links down and its fabric not started with nothing wrong (no capture of that case was
found: the rule is cautious), so there a link down or an unfinished fabric is said (unjudged), not a
finding.  Run by :func:`envbuild.hardware.rules.judge` with the health rules.
"""

from __future__ import annotations

from envbuild.hardware.judge import Judge, label
from envbuild.models.hardware import NOT_APPLICABLE, DeviceFacts


def _alone(j: Judge, rule: str, dev: DeviceFacts, what: str) -> bool:
    """Whether ``dev`` is the only GPU visible; if so ``what`` (a link down, an unfinished fabric) is said
    as unjudged instead of becoming a finding."""
    if len(j.facts.devices) != 1:
        return False
    j.skip(rule, f"{label(dev)} is the only GPU visible ({what}: unused by a job on one GPU)")
    return True


def nvlink(j: Judge) -> None:
    """A link down on a card that has links, where several GPUs are visible: a warning."""
    for dev in j.facts.devices:
        if dev.nvlink_up is None:
            if j.facts.vendor == "nvidia":
                j.skip("NVLink", f"not reported by {j.facts.source}")
            continue
        down = [i for i, up in enumerate(dev.nvlink_up) if not up]
        if not (dev.nvlink_up and down):
            continue
        links = f"NVLink link(s) {', '.join(map(str, down))} down of {len(dev.nvlink_up)}"
        if _alone(j, "NVLink", dev, links):
            continue
        j.out.warning(
            "W-HW-NVLINK",
            f"{label(dev)}: {links}: GPU-to-GPU traffic falls back to slower paths; ask the provider to "
            "check the NVLink bridge or baseboard",
        )


def fabric(j: Judge) -> None:
    """A fabric state other than completed (an NVSwitch system), where several GPUs are visible: an error.
    N/A: no finding."""
    for dev in j.facts.devices:
        state, status = dev.fabric_state, dev.fabric_status
        if state is None:
            if j.facts.vendor == "nvidia":
                j.skip("fabric", f"not reported by {j.facts.source}")
            continue
        if state == NOT_APPLICABLE:
            continue
        failed = status not in (None, NOT_APPLICABLE) and status.lower() != "success"
        if state.lower() == "completed" and not failed:
            continue
        what = f"NVLink fabric state {state!r}{f', status {status!r}' if status else ''}"
        if _alone(j, "fabric", dev, what):
            continue
        j.out.error(
            "E-HW-FABRIC",
            f"{label(dev)}: {what}: NVLink does not work until the fabric manager completes; ask the "
            "provider to start nvidia-fabricmanager (its version must equal the driver's)",
        )
