"""``envbuild check PROFILE --smi FILE`` on real captures (tests/fixtures/smi/real, SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import check_pytorch as check
from cli_support import envbuild

REAL = Path(__file__).parent / "fixtures" / "smi" / "real"


def test_a_table_capture_is_judged_and_its_driver_replaces_driver() -> None:
    proc = check("--smi", str(REAL / "nvidia-smi" / "H100NVLx2.txt"), "--driver", "580.95.05")
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "2 x NVIDIA H100 NVL, driver 550.54.14 (nvidia-smi table" in out
    assert "W-HW-DRIVER: --driver 580.95.05 differs from the driver 550.54.14" in out
    assert "E-DRIVER-TOO-OLD: driver 550.54.14 is older than" in out  # the plan's floor, the capture's driver
    assert out.count("E-HW-IDENTITY: ") == 2 and "lookalike h100-nvl" in out
    assert "I-HW-UNJUDGED: not judged: PCIe width (not reported by nvidia-smi table)" in out


def test_json_carries_the_merged_hardware_facts() -> None:
    xml = REAL / "nvidia-smi-q-x" / "a100-sxm4-v12.xml"
    proc = check("--target", "a100-80gb", "--smi", str(xml), "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["hardware"]["driver_version"] == "535.54.03"
    assert data["hardware"]["devices"][0]["mig_mode"] == "Enabled"
    assert {"E-HW-MIG", "E-DRIVER-TOO-OLD", "I-HW-UNJUDGED"} <= {f["code"] for f in data["findings"]}


def test_a_file_that_is_no_capture_exits_2_naming_it_and_the_formats(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("the provider says it is an H100\n", encoding="utf-8")
    proc = check("--smi", str(bad))
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and "nvidia-smi -q -x" in proc.stderr and "rocm-smi" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_amd_capture_is_judged_by_the_same_rules() -> None:
    capture = REAL / "rocm-smi" / "mi100_rocm602.json"  # 4 x MI100 (1002:738c) for an MI300X order
    proc = check("--target", "mi300x", "--smi", str(capture))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.count("E-HW-IDENTITY: ") == 4 and "PCI device id 1002:738c" in proc.stdout
    assert "ECC (ECC counts not reported by rocm-smi)" in proc.stdout


def test_one_capture_of_8_gpus_against_8_one_card_lots_is_information_naming_both(tmp_path: Path) -> None:
    """Issue 37 item 4: the order is 8 lots of h100 (one card each); the capture is one machine with 8.
    Before: no finding, and the summary said "the 8 lots are 8 separate machines" as if certain."""

    profile = tmp_path / "serve8.toml"  # written by hand: 8 GPUs on h100, torch declared
    profile.write_text(
        'name = "serve8"\nextends = "pytorch"\n[accelerator]\ntargets = ["h100"]\n[resources]\ngpus = 8\n',
        encoding="utf-8",
    )
    capture = REAL / "nvidia-smi" / "H100SXMx8.txt"
    proc = envbuild("check", profile, "--smi", capture, "--json")
    data = json.loads(proc.stdout)
    lots = [f for f in data["findings"] if f["code"] == "I-HW-LOTS"]
    assert len(lots) == 1 and lots[0]["severity"] == "info"
    message = lots[0]["message"]
    assert "shows 8 devices in one machine" in message and "the order is 8 lots of h100" in message
    assert "8 lots come as this one machine or as 8 machines" in message
    (line,) = data["plan"]["order"]
    assert line["lots"] == 8 and line["separate_machines"] is True  # the JSON key keeps its meaning
    human = envbuild("check", profile, "--smi", capture).stdout
    flat = " ".join(human.split())
    assert "the 8 lots may come as 8 separate machines (the provider rents lots" in flat
    assert "are 8 separate machines" not in flat
    multi = next(f["message"] for f in data["findings"] if f["code"] == "W-MULTI-LOT")
    assert "DDP/FSDP" in multi and "one server per lot" in multi and "multi-node serving" in multi
    assert "independent jobs run one per lot" in multi


def test_a_capture_no_larger_than_one_lot_says_nothing_about_lots() -> None:
    proc = check("--smi", str(REAL / "nvidia-smi" / "H100SXMx8.txt"), "--json")
    assert "I-HW-LOTS" not in {f["code"] for f in json.loads(proc.stdout)["findings"]}  # 1 GPU, 1 lot
