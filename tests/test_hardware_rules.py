"""The hardware rules (issue 26) on real ``nvidia-smi -q -x`` captures (tests/fixtures/smi/real, see
SOURCES.md).  A state no public capture shows is made by a ``str.replace`` on a real capture, here in
the test, and labelled "derived"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from envbuild.catalog import load_catalog
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.hardware.rules import Order, judge
from envbuild.models import Finding
from envbuild.models.hardware import HardwareFacts

REAL = Path(__file__).parent / "fixtures" / "smi" / "real" / "nvidia-smi-q-x"


def capture(name: str, *derive: tuple[str, str]) -> HardwareFacts:
    text = (REAL / name).read_text(encoding="utf-8")
    for old, new in derive:  # derived: a state the public captures do not show
        assert old in text, old
        text = text.replace(old, new)
    return parse_nvidia_xml(text, name)


def run(facts: HardwareFacts, *targets: str, gpus: int = 1, need: float | None = None) -> list[Finding]:
    cat = load_catalog()
    order = Order(targets=tuple(c for t in targets if (c := cat.card(t))), gpus=gpus, gpu_memory_gib=need)
    return list(judge(facts, order, cat))


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def one(findings: list[Finding], code: str) -> str:
    found = [f.message for f in findings if f.code == code]
    assert len(found) == 1, (code, codes(findings))
    return found[0]


def test_a_healthy_card_gets_no_warning_and_says_what_went_unjudged() -> None:
    findings = run(capture("rtx-3060-v12.xml"))  # idle RTX 3060, no target ordered
    assert codes(findings) == ["I-HW-UNJUDGED"]
    unjudged = one(findings, "I-HW-UNJUDGED")
    assert "identity (no target card ordered" in unjudged
    assert "gen 1 of 4 while not under load (normal power saving); judged only under load" in unjudged


def test_a_lookalike_is_named_with_the_card_it_passes_for() -> None:
    findings = run(capture("rtx-3090-v12.xml"), "rtx4090")  # an RTX 3090 for a 4090
    msg = one(findings, "E-HW-IDENTITY")
    assert "lookalike rtx3090" in msg and "in place of rtx4090" in msg
    assert "product name 'NVIDIA GeForce RTX 3090'" in msg


def test_a100_80gb_is_told_apart_from_40gb_and_from_h100() -> None:
    a100 = capture("a100-sxm4-v12.xml")  # NVIDIA A100-SXM4-80GB, 10de:20b2
    assert "E-HW-IDENTITY" not in codes(run(a100, "a100-80gb"))
    better = one(run(a100, "a100-40gb"), "W-HW-IDENTITY")  # 80 GB for 40 GB: not less
    assert "(card a100-80gb; product name 'NVIDIA A100-SXM4-80GB', PCI device id 10de:20b2" in better
    assert "card a100-80gb" in one(run(a100, "h100"), "E-HW-IDENTITY")


def test_mig_enabled_is_an_error_naming_the_memory_per_instance() -> None:
    findings = run(capture("a100-sxm4-v12.xml"), "a100-80gb")
    msg = one(findings, "E-HW-MIG")
    assert "4 MIG instance(s) share the 80.0 GiB (about 20.0 GiB or less each)" in msg
    assert "nvidia-smi -i 0 -mig 0" in msg
    assert "E-HW-FABRIC" not in codes(findings)  # fabric N/A on a card that does not report it


def test_narrowed_link_warns_and_a_full_generation_is_not_judged_unjudged() -> None:
    findings = run(capture("tesla-t4.xml"))  # x8 of x16, gen 3 of 3
    assert "PCIe link runs x8 of x16" in one(findings, "W-HW-PCIE-WIDTH")
    assert "W-HW-PCIE-GEN" not in codes(findings)
    assert "PCIe generation" not in one(findings, "I-HW-UNJUDGED")


def test_low_generation_is_unjudged_idle_and_a_warning_under_load() -> None:
    idle = run(capture("a10g.xml"))  # gen 1 of 4, 0 %, gpu_idle active
    assert "W-HW-PCIE-GEN" not in codes(idle)
    assert "gen 1 of 4 while not under load" in one(idle, "I-HW-UNJUDGED")
    # derived: the RTX 3080 capture under load (65 %) with its link at gen 2 of 4
    loaded = run(capture("rtx-3080-v13.xml", ("<current_link_gen>4<", "<current_link_gen>2<")))
    assert "gen 2 of 4 under load (65% busy)" in one(loaded, "W-HW-PCIE-GEN")


def test_other_processes_warn_with_the_memory_they_hold() -> None:
    msg = one(run(capture("tesla-t4.xml")), "W-HW-PROCESSES")
    assert "2 other process(es) hold 1.0 GiB" in msg and "python (1.0 GiB)" in msg


def test_memory_in_use_without_processes_warns_unless_outside_a_container() -> None:
    facts = capture("rtx-3080-v13.xml")  # 9184 MiB used, no process listed
    assert "9.0 GiB of memory in use" in one(run(facts), "W-HW-MEMORY-IN-USE")
    assert "W-HW-MEMORY-IN-USE" not in codes(run(replace(facts, in_container=False)))


def test_power_limit_below_default_warns_with_both_figures() -> None:
    msg = one(run(capture("rtx-3090-v12.xml")), "W-HW-POWER-LIMIT")
    assert "power limit 200 W is below the default 350 W" in msg


@pytest.mark.parametrize(
    ("name", "code"),
    [("rtx-3080-v13.xml", "E-HW-CLOCKS"), ("a10g.xml", "W-HW-CLOCKS")],  # 65 % busy / idle
)
def test_thermal_slowdown_is_an_error_under_load_and_a_warning_idle(name: str, code: str) -> None:
    kind = "event" if "v13" in name else "throttle"  # the DTD's v13 name and the older one
    tag = f"clocks_{kind}_reason_hw_thermal_slowdown"
    facts = capture(name, (f"<{tag}>Not Active</{tag}>", f"<{tag}>Active</{tag}>"))  # derived
    assert "HW thermal slowdown active" in one(run(facts), code)


def test_uncorrectable_ecc_and_pending_remap_are_errors() -> None:
    facts = capture(  # derived from the A10G capture (row remapping, 0 errors)
        "a10g.xml",
        ("<remapped_row_pending>No<", "<remapped_row_pending>Yes<"),
    )
    msg = one(run(facts), "E-HW-ECC")
    assert "a row remap is pending" in msg and "reset the GPU" in msg
    assert "E-HW-ECC" not in codes(run(capture("a10g.xml")))


def test_compute_mode_and_fabric() -> None:
    facts = capture(  # derived from the A100 capture: exclusive mode, fabric manager not started
        "a100-sxm4-v12.xml",
        ("<compute_mode>Default<", "<compute_mode>Exclusive_Process<"),
        ("<state>N/A</state>", "<state>Not Started</state>"),
    )
    assert "compute mode Exclusive_Process" in one(run(facts, "a100-80gb"), "W-HW-COMPUTE-MODE")
    # derived: a second GPU of the same board beside it, so NVLink between GPUs is in use
    (dev,) = facts.devices
    pair = replace(facts, devices=(dev, replace(dev, index=1, pci_bus_id="00000000:0F:00.0", uuid=None)))
    errors = [f.message for f in run(pair, "a100-80gb", gpus=2) if f.code == "E-HW-FABRIC"]
    assert len(errors) == 2 and all("nvidia-fabricmanager" in m for m in errors)


def test_one_gpu_alone_is_not_failed_for_its_fabric() -> None:
    """A GPU passed through alone from an NVSwitch board may read "Not Started" with nothing wrong: with
    one GPU visible nothing travels over NVLink, so the state is said (unjudged), not an error."""
    facts = capture("a100-sxm4-v12.xml", ("<state>N/A</state>", "<state>Not Started</state>"))  # derived
    findings = run(facts, "a100-80gb")
    assert not [f for f in findings if f.code == "E-HW-FABRIC"]
    assert "fabric (device 0" in one(findings, "I-HW-UNJUDGED")
    assert "'Not Started', status 'N/A': unused by a job on one GPU" in one(findings, "I-HW-UNJUDGED")


def test_count_and_memory_against_the_order() -> None:
    findings = run(capture("rtx-3090-v12.xml"), gpus=2, need=30)
    assert "lists 1 device(s); the job needs 2" in one(findings, "E-HW-COUNT")
    assert "the job needs 30 GiB per device" in one(findings, "E-HW-MEMORY")


def test_an_sm_clock_below_half_its_maximum_under_load_fails_with_no_reason_reported() -> None:
    """Derived from the A100 capture: busy, no slowdown reason active (a GeForce card or a VM may report
    none), the SM clock at 600 of 1410 MHz; then at 1275 MHz, a healthy boost under a power cap."""
    (dev,) = capture("a100-sxm4-v12.xml").devices
    busy = replace(
        dev, utilization_gpu_pct=100.0, clock_event_reasons=(), sm_clock_max_mhz=1410.0, mig_mode=None
    )
    slow = replace(capture("a100-sxm4-v12.xml"), devices=(replace(busy, sm_clock_mhz=600.0),))
    assert "SM clock 600 of 1410 MHz (43%) under load (100% busy)" in one(
        run(slow, "a100-80gb"), "E-HW-CLOCKS"
    )
    fine = replace(slow, devices=(replace(busy, sm_clock_mhz=1275.0),))
    assert not [f for f in run(fine, "a100-80gb") if f.code.endswith("HW-CLOCKS")]


def test_a_slowdown_under_load_names_the_sm_clock() -> None:
    (dev,) = capture("a100-sxm4-v12.xml").devices  # derived: HW slowdown active at 1200 of 1410 MHz
    hot = replace(
        dev,
        utilization_gpu_pct=97.0,
        clock_event_reasons=("hw_slowdown",),
        sm_clock_mhz=1200.0,
        sm_clock_max_mhz=1410.0,
    )
    facts = replace(capture("a100-sxm4-v12.xml"), devices=(hot,))
    assert "HW slowdown active (SM clock 1200 of 1410 MHz) under load" in one(
        run(facts, "a100-80gb"), "E-HW-CLOCKS"
    )
