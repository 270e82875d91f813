"""The hardware rules where the earlier tests left gaps (issue 26): NVLink and fabric on cards that have
none, correctable ECC, a link down, MI300X partitions, mixed vendors, two captures of one machine, and
an old driver through ``check --smi``.

Real captures come from tests/fixtures/smi/real (SOURCES.md).  A state no public capture shows is
*derived* from one here, in the test (a ``str.replace`` on its text, or ``dataclasses.replace`` on its
facts), and says so.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from cli_support import check_pytorch as check

from envbuild.catalog import load_catalog
from envbuild.hardware.captures import parse_capture, read_capture
from envbuild.hardware.rules import Order, judge
from envbuild.models import Finding
from envbuild.models.hardware import NOT_APPLICABLE, HardwareFacts

SMI = Path(__file__).parent / "fixtures" / "smi"
REAL = SMI / "real"
XML = REAL / "nvidia-smi-q-x"


def derived(path: Path, *changes: tuple[str, str]) -> str:
    """The text of a real capture with ``changes`` made (derived: the public captures lack the state)."""
    text = path.read_text(encoding="utf-8")
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def run(facts: HardwareFacts, *targets: str) -> list[Finding]:
    cat = load_catalog()
    return list(judge(facts, Order(targets=tuple(c for t in targets if (c := cat.card(t)))), cat))


def unjudged(findings: list[Finding]) -> str:
    return next((f.message for f in findings if f.code == "I-HW-UNJUDGED"), "")


def test_cards_without_nvlink_leave_nvlink_and_fabric_out_of_the_unjudged() -> None:
    for name in ("tesla-t4.xml", "rtx-3060-v12.xml", "rtx-4000-sff-ada-v13.xml", "quadro-p400.xml"):
        facts = read_capture(XML / name)
        assert (facts.devices[0].nvlink_up, facts.devices[0].fabric_state) == ((), NOT_APPLICABLE), name
        said = unjudged(run(facts))
        assert "NVLink" not in said and "fabric" not in said, (name, said)
    # the plain screen of an L4 (no fabric column, no NVLink): told from the product name
    l4 = read_capture(REAL / "nvidia-smi" / "L4.txt").devices[0]
    assert (l4.nvlink_up, l4.fabric_state) == ((), NOT_APPLICABLE)
    # an RTX 3090 may carry an NVLink bridge: unjudged; it is no NVSwitch card: fabric N/A
    rtx3090 = read_capture(XML / "rtx-3090-v12.xml")
    assert (rtx3090.devices[0].nvlink_up, rtx3090.devices[0].fabric_state) == (None, NOT_APPLICABLE)
    assert "NVLink (not reported by nvidia-smi -q -x)" in unjudged(run(rtx3090))
    # an A100 SXM has 12 links the XML does not show: still unjudged
    assert "NVLink (not reported by nvidia-smi -q -x)" in unjudged(
        run(read_capture(XML / "a100-sxm4-v12.xml"))
    )


def test_correctable_ecc_above_the_threshold_is_a_warning_with_its_source() -> None:
    # derived from a100-sxm4-v12.xml: 60,000,000 volatile SRAM correctable errors
    text = derived(XML / "a100-sxm4-v12.xml", ("<sram_correctable>0<", "<sram_correctable>60000000<"))
    findings = run(parse_capture(text, "a100-derived.xml"), "a100-80gb")
    (warn,) = [f for f in findings if f.code == "W-HW-ECC-CORRECTABLE"]
    assert "60,000,000 correctable ECC errors since the driver loaded (more than 50,000,000)" in warn.message
    assert warn.source is not None and "facebookresearch/gcm" in warn.source
    assert "E-HW-ECC" not in [f.code for f in findings]


def test_an_nvlink_link_down_is_a_warning() -> None:
    # derived: NVML's state of the A100's 12 links (the XML carries none), link 3 down, on two GPUs
    real = read_capture(XML / "a100-sxm4-v12.xml")
    links = tuple(n != 3 for n in range(12))
    dev = replace(real.devices[0], nvlink_up=links)
    facts = replace(real, devices=(dev, replace(dev, index=1, pci_bus_id="00000000:0F:00.0", uuid=None)))
    warnings = [f for f in run(facts, "a100-80gb") if f.code == "W-HW-NVLINK"]
    assert warnings and "NVLink link(s) 3 down of 12" in warnings[0].message
    alone = replace(real, devices=(dev,))  # the same card, the only one visible: its links carry nothing
    assert not [f for f in run(alone, "a100-80gb") if f.code == "W-HW-NVLINK"]


def test_mi300x_partitions_cpx_and_nps4_are_errors() -> None:
    # derived from the hand-written amd-smi capture (tests/fixtures/smi/README.md): CPX / NPS4
    text = derived(
        SMI / "amd-smi-static-mi300x.json",
        ('"compute_partition": "SPX"', '"compute_partition": "CPX"'),
        ('"memory_partition": "NPS1"', '"memory_partition": "NPS4"'),
    )
    findings = run(parse_capture(text, "amd-smi-derived.json"), "mi300x")
    (err,) = [f for f in findings if f.code == "E-HW-MIG"]
    assert "partition mode CPX/NPS4 splits the card into 8 device(s)" in err.message
    assert "--compute-partition SPX" in err.message
    nps4 = derived(
        SMI / "amd-smi-static-mi300x.json", ('"memory_partition": "NPS1"', '"memory_partition": "NPS4"')
    )
    assert "partition mode SPX/NPS4" in run(parse_capture(nps4, "amd-smi-nps4.json"), "mi300x")[0].message


def test_captures_of_nvidia_and_amd_cards_are_refused_together() -> None:
    proc = check("--smi", str(XML / "tesla-t4.xml"), "--smi", str(REAL / "rocm-smi" / "mi100_rocm602.json"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the captures are of NVIDIA and AMD cards, not one machine" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_two_captures_of_one_machine_are_merged(tmp_path: Path) -> None:
    # derived from tesla-t4.xml: the same machine read again without its process list, and with
    # compute mode Exclusive_Process; the real capture lists the processes
    first = tmp_path / "t4-again.xml"
    first.write_text(
        derived(
            XML / "tesla-t4.xml",
            ("<processes>", "<!-- no processes --><processes_gone>"),
            ("</processes>", "</processes_gone>"),
            ("<compute_mode>Default<", "<compute_mode>Exclusive_Process<"),
        ),
        encoding="utf-8",
    )
    alone = json.loads(check("--smi", str(first), "--json").stdout)
    assert "processes (not reported by nvidia-smi -q -x)" in unjudged(
        [Finding(**f) for f in alone["findings"]]
    )
    proc = check("--smi", str(first), "--smi", str(XML / "tesla-t4.xml"), "--json")
    data = json.loads(proc.stdout)
    codes = [f["code"] for f in data["findings"]]
    assert "W-HW-PROCESSES" in codes and "W-HW-COMPUTE-MODE" in codes  # one from each capture
    assert len(data["hardware"]["devices"]) == 1  # one card: matched by its PCI bus id
    assert data["hardware"]["devices"][0]["compute_mode"] == "Exclusive_Process"  # the first wins


def test_an_old_driver_capture_through_check_smi() -> None:
    """quadro-p400.xml: driver 418.43 (CUDA 10.1), no DOCTYPE, single/double-bit ECC layout."""
    proc = check("--smi", str(XML / "quadro-p400.xml"))
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "1 x Quadro P400, driver 418.43 (nvidia-smi -q -x" in out
    assert "E-DRIVER-TOO-OLD: driver 418.43 is older than" in out
    assert "E-HW-IDENTITY: device 0 (Quadro P400) is not a card the catalog knows" in out
    said = out[out.index("I-HW-UNJUDGED") :]
    assert "NVLink" not in said and "fabric" not in said  # a Quadro P400 has neither
    assert "power limit (not reported by nvidia-smi -q -x)" in said  # power N/A in this capture
