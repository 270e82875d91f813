"""``nvidia-smi -q -x`` parsed from real captures (tests/fixtures/smi/real/nvidia-smi-q-x, sources in
tests/fixtures/smi/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.errors import CaptureError
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.models.hardware import NOT_APPLICABLE, DeviceFacts, GpuProcess, HardwareFacts, PcieLink

XML = Path(__file__).parent / "fixtures" / "smi" / "real" / "nvidia-smi-q-x"


def facts(name: str) -> HardwareFacts:
    path = XML / name
    return parse_nvidia_xml(path.read_text(encoding="utf-8"), str(path))


def device(name: str) -> DeviceFacts:
    (dev,) = facts(name).devices
    return dev


def test_a100_with_mig_enabled_dtd_v12() -> None:
    got = facts("a100-sxm4-v12.xml")  # begins with <!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
    assert (got.source, got.vendor, got.driver_version, got.runtime_version) == (
        "nvidia-smi -q -x",
        "nvidia",
        "535.54.03",
        "12.2",
    )
    (dev,) = got.devices
    assert (dev.name, dev.pci_device_id, dev.pci_subsystem_id) == (
        "NVIDIA A100-SXM4-80GB",
        "10de:20b2",
        "10de:147f",
    )
    assert (dev.mig_mode, dev.mig_devices) == ("Enabled", 4)
    assert (dev.memory_total_mib, dev.memory_used_mib) == (81920, 50)
    assert dev.utilization_gpu_pct is None  # "N/A" under MIG
    assert dev.pcie == PcieLink(gen_current=4, gen_max=4, width_current=16, width_max=16)
    assert dev.ecc.mode_current == "Enabled"
    assert (dev.ecc.volatile_uncorrectable, dev.ecc.aggregate_correctable) == (0, 0)
    assert dev.ecc.remap_pending is None  # <remapped_rows>N/A</remapped_rows> under MIG
    assert dev.clock_event_reasons == ()  # clocks_event_reasons, all "Not Active"
    assert (dev.power_limit_w, dev.default_power_limit_w) == (500, 500)
    assert (dev.compute_mode, dev.persistence_mode, dev.processes) == ("Default", "Disabled", ())
    assert (dev.fabric_state, dev.fabric_status) == (NOT_APPLICABLE, NOT_APPLICABLE)
    assert dev.nvlink_up is None  # the XML does not carry NVLink state


def test_a10g_narrowed_idle_link_row_remapping_and_a_process_dtd_v11() -> None:
    dev = device("a10g.xml")
    assert dev.pcie == PcieLink(gen_current=1, gen_max=4, width_current=8, width_max=16)
    assert dev.clock_event_reasons == ("gpu_idle",)  # clocks_throttle_reasons in DTD v11
    assert dev.utilization_gpu_pct == 0
    assert (dev.ecc.remap_pending, dev.ecc.remap_failure, dev.ecc.remapped_rows_uncorrectable) == (
        False,
        False,
        0,
    )
    assert dev.processes == (GpuProcess(pid=725, name="/usr/lib/xorg/Xorg", used_memory_mib=22),)
    assert dev.pci_device_id is None  # the capture's ids read 000000DE: blanked out
    assert (dev.mig_mode, dev.mig_devices) == (NOT_APPLICABLE, 0)
    # DTD v11 has no <fabric>, the XML no NVLink: an A10G has neither (envbuild/hardware/links.py)
    assert (dev.fabric_state, dev.nvlink_up) == (NOT_APPLICABLE, ())


def test_t4_retired_pages_and_power_readings_of_dtd_v11() -> None:
    dev = device("tesla-t4.xml")
    assert (dev.ecc.retired_pages_pending, dev.ecc.retired_pages) == (False, 0)
    assert (dev.power_limit_w, dev.default_power_limit_w) == (70, 70)  # enforced_power_limit
    assert [p.used_memory_mib for p in dev.processes or ()] == [22, 1005]
    assert dev.pcie.width_current == 8


def test_old_driver_with_single_and_double_bit_ecc_layout() -> None:
    got = facts("quadro-p400.xml")  # driver 418, no DOCTYPE line
    assert got.driver_version == "418.43"
    (dev,) = got.devices
    assert dev.ecc.mode_current == NOT_APPLICABLE
    assert dev.ecc.volatile_uncorrectable is None  # double_bit/total is "N/A"
    assert dev.power_limit_w is None
    assert dev.mig_mode is None  # the DTD of driver 418 has no <mig_mode>


def test_power_limit_below_default_is_read_as_printed() -> None:
    dev = device("rtx-3090-v12.xml")
    assert (dev.power_limit_w, dev.default_power_limit_w) == (200, 350)


def test_dtd_v13_sram_split_counts_and_load() -> None:
    dev = device("rtx-3080-v13.xml")
    assert (dev.utilization_gpu_pct, dev.memory_used_mib, dev.clock_event_reasons) == (65, 9184, ())
    ada = device("rtx-4000-sff-ada-v13.xml")
    assert ada.ecc.mode_current == "Disabled"
    assert ada.ecc.volatile_uncorrectable is None  # every sram_uncorrectable_parity/secded is "N/A"
    assert len(ada.processes or ()) == 4


def test_ecc_counts_sum_sram_and_dram() -> None:
    text = (XML / "a100-sxm4-v12.xml").read_text(encoding="utf-8")
    # the first <volatile> block is a MIG slice's; the card's own follows <ecc_errors>
    head, tail = text.split("<ecc_errors>", 1)
    tail = tail.replace(
        "<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>2</dram_uncorrectable>", 1
    )
    tail = tail.replace(
        "<sram_uncorrectable>0</sram_uncorrectable>", "<sram_uncorrectable>1</sram_uncorrectable>", 1
    )
    (dev,) = parse_nvidia_xml(head + "<ecc_errors>" + tail).devices
    assert (dev.ecc.volatile_uncorrectable, dev.ecc.aggregate_uncorrectable) == (3, 0)


ENTITY = '<!DOCTYPE nvidia_smi_log [<!ENTITY e "{}">]>\n<nvidia_smi_log>&e;</nvidia_smi_log>'
NO_GPU = "<nvidia_smi_log><driver_version>535</driver_version></nvidia_smi_log>"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty capture"),
        ("  \n", "empty capture"),
        ("@@TRUNCATED@@", "truncated"),
        ("<html><body>not it</body></html>", "root element is <html>"),
        ("nvidia-smi: command not found", "not XML"),
        (ENTITY.format("x"), "refused"),
        (ENTITY.replace('"{}"', 'SYSTEM "file:///etc/passwd"'), "refused"),
        (NO_GPU, "no <gpu>"),
    ],
)
def test_bad_xml_names_the_file(text: str, needle: str) -> None:
    if text == "@@TRUNCATED@@":
        full = (XML / "tesla-t4.xml").read_text(encoding="utf-8")
        text = full[: len(full) // 2]
    with pytest.raises(CaptureError, match=needle) as info:
        parse_nvidia_xml(text, "capture.xml")
    assert str(info.value).startswith("capture.xml: ")
