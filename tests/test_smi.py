"""Parsers of the vendor tools' outputs as the validator reads them (``envbuild.hardware``: each
returns :class:`HardwareFacts`), against the recorded fixtures in tests/fixtures/smi/."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from validate_support import smi_text

from envbuild.errors import CaptureError
from envbuild.hardware.amd import parse_amd_smi, parse_rocm_smi
from envbuild.hardware.nvidia_query import QUERY, cc_to_arch, parse_query_gpu
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.hardware.tools import tool_name
from envbuild.hardware.values import mib
from envbuild.models.hardware import HardwareFacts

QUERY_COMMAND = " ".join(QUERY)


def test_nvidia_xml_h100() -> None:
    facts = parse_nvidia_xml(smi_text("nvidia-smi-q-x-h100.xml"), "nvidia-smi -q -x")
    assert (facts.source, facts.vendor, tool_name(facts.source)) == (
        "nvidia-smi -q -x",
        "nvidia",
        "nvidia-smi",
    )
    assert facts.driver_version == "570.124.06"
    assert facts.runtime_version == "12.8"
    (gpu,) = facts.devices
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_total_mib == 81559
    assert gpu.uuid == "GPU-6f7c1d5e-2b9a-4c8e-9d31-0a4b5c6d7e81"
    assert gpu.pci_bus_id == "00000000:18:00.0"
    assert gpu.arch is None  # the XML carries no compute capability


def test_nvidia_xml_b200_pair_in_index_order() -> None:
    facts = parse_nvidia_xml(smi_text("nvidia-smi-q-x-b200x2.xml"), "nvidia-smi -q -x")
    assert [g.index for g in facts.devices] == [0, 1]
    assert {g.name for g in facts.devices} == {"NVIDIA B200"}
    assert facts.driver_version == "575.57.08"


def test_nvidia_xml_h200_memory() -> None:
    assert (
        parse_nvidia_xml(smi_text("nvidia-smi-q-x-h200.xml"), "nvidia-smi -q -x").devices[0].memory_total_mib
        == 143771
    )


def test_nvidia_csv_with_units_and_compute_cap() -> None:
    facts = parse_query_gpu(smi_text("nvidia-smi-query-gpu-h100x2.csv"), QUERY_COMMAND)
    assert (facts.source, facts.vendor, facts.path) == ("nvidia-smi --query-gpu", "nvidia", QUERY_COMMAND)
    assert tool_name(facts.source) == "nvidia-smi"
    assert len(facts.devices) == 2
    assert facts.driver_version == "570.124.06"
    assert [(g.arch, g.memory_total_mib) for g in facts.devices] == [("sm_90", 81559), ("sm_90", 81559)]
    assert [g.index for g in facts.devices] == [0, 1]
    assert facts.devices[1].uuid == "GPU-1e2d3c4b-5a69-4788-9a0b-c1d2e3f4a5b6"
    assert facts.devices[1].pci_bus_id == "00000000:2A:00.0"


def test_nvidia_csv_nounits() -> None:
    facts = parse_query_gpu("index, name, memory.total [MiB]\n0, NVIDIA H200, 143771\n", None)
    assert facts.devices[0].memory_total_mib == 143771


def test_nvidia_csv_values_it_cannot_give_are_not_reported() -> None:
    """Hand-written: nvidia-smi prints ``[N/A]`` / ``[Not Supported]`` for a value it cannot give."""
    text = "index, name, uuid, memory.total [MiB], compute_cap\n0, Tesla T4, [N/A], [Not Supported], [N/A]\n"
    (dev,) = parse_query_gpu(text, None).devices
    assert (dev.name, dev.uuid, dev.memory_total_mib, dev.arch) == ("Tesla T4", None, None, None)


@pytest.mark.parametrize(
    ("cc", "arch"), [("9.0", "sm_90"), (" 12.0 ", "sm_120"), ("[N/A]", None), ("", None)]
)
def test_compute_capability_is_the_arch(cc: str, arch: str | None) -> None:
    assert cc_to_arch(cc) == arch


def test_amd_smi_static_mi300x() -> None:
    facts = parse_amd_smi(smi_text("amd-smi-static-mi300x.json"), "amd-smi static --json")
    assert (facts.source, facts.vendor, tool_name(facts.source)) == ("amd-smi", "amd", "amd-smi")
    (gpu,) = facts.devices
    assert (gpu.name, gpu.arch, gpu.memory_total_mib) == ("AMD Instinct MI300X", "gfx942", 196592)
    assert facts.driver_version == "6.8.5"
    assert gpu.pci_bus_id == "0000:05:00.0"


def test_amd_smi_older_string_sizes_and_gpu_data_wrapper() -> None:
    text = (
        '{"gpu_data": [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X"}, '
        '"vram": {"size": "196592 MB"}}]}'
    )
    assert parse_amd_smi(text, None).devices[0].memory_total_mib == 196592


def test_rocm_smi_productname() -> None:
    facts = parse_rocm_smi(smi_text("rocm-smi-showproductname-mi300x.json"), "rocm-smi --json")
    assert (facts.source, tool_name(facts.source)) == ("rocm-smi", "rocm-smi")
    (gpu,) = facts.devices
    assert (gpu.index, gpu.name, gpu.arch) == (0, "AMD Instinct MI300X", "gfx942")
    assert facts.driver_version == "6.8.5"


Parser = Callable[[str, "str | None"], HardwareFacts]


@pytest.mark.parametrize(
    ("parser", "command", "text", "needle"),
    [
        (
            parse_nvidia_xml,
            "nvidia-smi -q -x",
            "NVIDIA-SMI has failed because it couldn't communicate",
            "not XML",
        ),
        (parse_nvidia_xml, "nvidia-smi -q -x", "<other/>", "expected <nvidia_smi_log>"),
        (parse_amd_smi, "amd-smi static --json", "{not json", "not JSON"),
        (parse_amd_smi, "amd-smi static --json", '{"a": 1}', "expected a list"),
        (parse_rocm_smi, "rocm-smi --json", "[]", "expected an object"),
        (parse_query_gpu, QUERY_COMMAND, "", "empty output"),
        (parse_query_gpu, QUERY_COMMAND, "index, uuid\n0, GPU-1\n", "no 'name' column"),
        (
            parse_query_gpu,
            QUERY_COMMAND,
            "index, name, uuid\n0, NVIDIA H100\n",
            "row 1 has 2 fields, the header 3",
        ),
        (parse_query_gpu, QUERY_COMMAND, "index, name\n0, [N/A]\n", "row 1 has no name"),
    ],
)
def test_garbage_is_a_clear_error_naming_the_command(
    parser: Parser, command: str, text: str, needle: str
) -> None:
    with pytest.raises(CaptureError, match=needle) as info:
        parser(text, command)
    assert str(info.value).startswith(f"{command}: ")


def test_parse_mib_units() -> None:
    assert mib("2 GiB") == 2048
    assert mib("512 KiB") == 0.5
    assert mib("N/A") is None


def test_the_validators_xml_path_refuses_entities() -> None:
    # the stdlib parser the validator used before expanded internal entities (billion laughs)
    laughs = '<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
    text = laughs + "<nvidia_smi_log><driver_version>&b;</driver_version><gpu/></nvidia_smi_log>"
    with pytest.raises(CaptureError, match="refused"):
        parse_nvidia_xml(text, "nvidia-smi -q -x")
