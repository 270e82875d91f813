"""Capture files as ``check --smi`` reads them: the plain ``nvidia-smi`` screen, ``rocm-smi --json``,
``amd-smi --json``, the format told by the content, and bad captures.  Real captures: see
tests/fixtures/smi/SOURCES.md."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envbuild.errors import EXIT_USAGE, CaptureError
from envbuild.hardware.captures import read_capture
from envbuild.hardware.nvidia_query import parse_query_gpu
from envbuild.models.hardware import NOT_APPLICABLE, GpuProcess, HardwareFacts, PcieLink

SMI = Path(__file__).parent / "fixtures" / "smi"
REAL = SMI / "real"


def test_plain_screen_of_eight_h100_sxm() -> None:
    got = read_capture(REAL / "nvidia-smi" / "H100SXMx8.txt")
    assert (got.source, got.driver_version, got.runtime_version) == ("nvidia-smi table", "565.57.01", "12.7")
    assert [d.index for d in got.devices] == list(range(8))
    dev = got.devices[0]
    assert (dev.name, dev.pci_bus_id, dev.memory_total_mib, dev.memory_used_mib) == (
        "NVIDIA H100 80GB HBM3",
        "00000000:18:00.0",
        81559,
        1,
    )
    assert (dev.persistence_mode, dev.compute_mode, dev.mig_mode, dev.power_limit_w) == (
        "Enabled",
        "Default",
        "Disabled",
        700,
    )
    assert (dev.ecc.volatile_uncorrectable, dev.processes) == (0, ())  # "No running processes found"
    # what the screen does not carry stays unreported
    assert (dev.pci_device_id, dev.pcie, dev.clock_event_reasons, dev.fabric_state) == (
        None,
        PcieLink(),
        None,
        None,
    )


def test_plain_screen_geforce_without_ecc_or_mig() -> None:
    dev = read_capture(REAL / "nvidia-smi" / "RTX3090.txt").devices[1]
    assert (dev.ecc.volatile_uncorrectable, dev.mig_mode) == (None, NOT_APPLICABLE)


def test_plain_screen_processes_table(tmp_path: Path) -> None:
    # Derived from the real H100 screen: one process row (the layout nvidia-smi 5xx prints) in place
    # of "No running processes found"; no public screen of a rented H100 with processes was found.
    text = (REAL / "nvidia-smi" / "H100SXMx8.txt").read_text(encoding="utf-8")
    row = "|    3   N/A  N/A     20473      C   python train.py" + " " * 28 + "12640MiB |"
    text = text.replace("|  No running processes found" + " " * 61 + "|", row)
    assert row in text
    path = tmp_path / "nvidia-smi.txt"
    path.write_text(text, encoding="utf-8")
    got = read_capture(path)
    assert got.devices[3].processes == (GpuProcess(pid=20473, name="python train.py", used_memory_mib=12640),)
    assert got.devices[0].processes == ()


def test_rocm_smi_mi100_four_cards() -> None:
    got = read_capture(REAL / "rocm-smi" / "mi100_rocm602.json")
    assert (got.source, got.vendor, got.driver_version, len(got.devices)) == ("rocm-smi", "amd", "6.3.6", 4)
    dev = got.devices[0]
    assert (dev.name, dev.pci_device_id, dev.pci_bus_id) == (
        "Arcturus GL-XL [Instinct MI100]",
        "1002:738c",
        "0000:83:00.0",
    )
    assert dev.memory_total_mib == pytest.approx(34342961152 / 2**20)
    assert (dev.pcie.gen_current, dev.pcie.width_current, dev.power_limit_w) == (4, 16, 290)
    assert dev.processes is None  # no PID rows


def test_rocm_smi_newer_fields_and_a_machine_wide_process_row() -> None:
    assert read_capture(REAL / "rocm-smi" / "rx6700xt_rocm612.json").devices[0].arch == "gfx1031"
    six = read_capture(REAL / "rocm-smi" / "mi100_rocm571.json")  # PID104225 on a 6-card machine
    assert {d.processes for d in six.devices} == {None}  # the row names no card


def test_amd_smi_static_partition_modes() -> None:
    # hand-written (tests/fixtures/smi/README.md): no public amd-smi capture of an MI300X was found
    dev = read_capture(SMI / "amd-smi-static-mi300x.json").devices[0]
    assert (dev.compute_partition, dev.memory_partition, dev.pci_device_id) == ("SPX", "NPS1", "1002:74a1")
    assert (dev.pcie.gen_max, dev.pcie.width_max, dev.power_limit_w) == (5, 16, 750)


def test_the_content_decides_the_parser(tmp_path: Path) -> None:
    plain = tmp_path / "capture.txt"
    shutil.copy(REAL / "nvidia-smi-q-x" / "a100-sxm4-v12.xml", plain)
    assert read_capture(plain).source == "nvidia-smi -q -x"


@pytest.mark.parametrize(
    ("name", "source", "needle"),
    [
        ("rocm-smi.json", "nvidia-smi-q-x/tesla-t4.xml", "the name says rocm-smi"),
        ("nvidia-smi.xml", "rocm-smi/vega-10-XT.json", "the name says nvidia-smi"),
        ("amd_smi_static.json", "rocm-smi/vega-10-XT.json", "the name says amd-smi"),
        ("gpu.json", "nvidia-smi-q-x/tesla-t4.xml", "a .json file holding"),
    ],
)
def test_a_name_saying_another_tool_is_refused(tmp_path: Path, name: str, source: str, needle: str) -> None:
    path = tmp_path / name
    shutil.copy(REAL / source, path)
    with pytest.raises(CaptureError, match=needle):
        read_capture(path)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty capture"),
        (b"\n\n", "empty capture"),
        (b"Hello, this is a GPU listing\n", "not the output of a supported tool"),
        (b'{"gpus": [1, 2]}', "JSON, but not an amd-smi or rocm-smi capture"),
        (b'{"card0": {"Card Series": "MI100"', "truncated"),
        (b"\xff\xfe<\x00n\x00", "not text"),
    ],
)
def test_bad_captures_name_the_file_and_the_formats(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "capture.out"
    path.write_bytes(content)
    with pytest.raises(CaptureError, match=needle) as info:
        read_capture(path)
    assert str(info.value).startswith(f"{path}: ")
    assert info.value.exit_code == EXIT_USAGE
    if "truncated" not in needle:
        assert "`nvidia-smi -q -x` (XML)" in str(info.value)


def test_a_truncated_screen_is_refused(tmp_path: Path) -> None:
    text = (REAL / "nvidia-smi" / "L4.txt").read_text(encoding="utf-8")
    path = tmp_path / "nvidia-smi.txt"
    path.write_text(text[: text.index("Processes:")], encoding="utf-8")
    with pytest.raises(CaptureError, match="truncated `nvidia-smi` screen"):
        read_capture(path)


def test_a_missing_file_is_a_capture_error(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="cannot read the capture"):
        read_capture(tmp_path / "absent.xml")


# envbuild's own captures of one lent H200 (tests/fixtures/smi/SOURCES.md): the NVIDIA formats the
# validator and `check --smi` read, from one machine, agree with each other and pass an h200 order.
H200_CAPTURES = (
    REAL / "nvidia-smi-q-x" / "h200-580.159.04.xml",
    REAL / "nvidia-smi" / "H200.txt",
    REAL / "nvidia-smi-query" / "h200.csv",  # the validator's own --query-gpu
)


def _h200_readings() -> list[HardwareFacts]:
    return [read_capture(p) for p in H200_CAPTURES]


def test_check_smi_reads_the_query_gpu_csv_and_refuses_what_is_not(tmp_path: Path) -> None:
    """Before: `check --smi` refused the --query-gpu CSV, the one NVIDIA output with the compute
    capability (the validator read it already)."""
    got = read_capture(H200_CAPTURES[2])
    assert (got.source, got.devices[0].arch) == ("nvidia-smi --query-gpu", "sm_90")
    text = H200_CAPTURES[2].read_text(encoding="utf-8")
    assert read_capture(H200_CAPTURES[2]) == parse_query_gpu(text, str(H200_CAPTURES[2]))
    named = tmp_path / "rocm-smi.csv"  # the name says another tool
    named.write_text(text, encoding="utf-8")
    with pytest.raises(CaptureError, match="the name says rocm-smi"):
        read_capture(named)
    other = tmp_path / "gpus.csv"  # a CSV, but no query fields
    other.write_text("gpu, model name\n0, H200\n", encoding="utf-8")
    with pytest.raises(CaptureError, match="not the output of a supported tool"):
        read_capture(other)
    cut = tmp_path / "cut.csv"
    cut.write_text(text.splitlines()[0] + "\n0, NVIDIA H200, GPU-1\n", encoding="utf-8")
    with pytest.raises(CaptureError, match="row 1 has 3 fields, the header 7"):
        read_capture(cut)


@pytest.mark.parametrize("which", range(3), ids=["xml", "screen", "query-gpu"])
def test_a_recorded_h200_reads_as_one_h200_in_every_format(which: int) -> None:
    from envbuild.catalog import load_catalog
    from envbuild.hardware.rules import Order, judge_rules

    got = _h200_readings()[which]
    (dev,) = got.devices
    assert (dev.name, dev.memory_total_mib, dev.pci_bus_id) == ("NVIDIA H200", 143771, "00000000:00:06.0")
    assert got.driver_version == "580.159.04"
    cat = load_catalog()
    card = cat.card("h200")
    assert card is not None
    judged = judge_rules(got, Order(targets=(card,), gpus=1), cat)
    failing = [(v.rule, v.verdict) for v in judged.verdicts if v.verdict not in ("passed", "unjudged")]
    assert failing == []
    assert [f.code for f in judged.findings if f.code.startswith(("E-", "W-"))] == []


def test_the_recorded_h200s_xml_carries_what_the_screen_cannot() -> None:
    xml, screen, query = (r.devices[0] for r in _h200_readings())
    assert (xml.pci_device_id, xml.pcie.gen_current, xml.pcie.width_current) == ("10de:2335", 5, 16)
    assert (xml.ecc.mode_current, xml.ecc.volatile_uncorrectable, xml.ecc.remap_pending) == (
        "Enabled",
        0,
        False,
    )
    assert (xml.power_limit_w, xml.persistence_mode, xml.processes) == (700, "Enabled", ())
    assert (screen.pci_device_id, screen.pcie) == (None, PcieLink())
    assert (query.arch, query.uuid) == ("sm_90", "GPU-beee74ee-4a96-3023-fe6a-d6654c1b3026")
