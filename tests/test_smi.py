"""Parsers of the vendor tools' outputs, against the recorded fixtures in tests/fixtures/smi/."""

from __future__ import annotations

import pytest
from validate_support import smi_text

from envbuild.validate.smi import (
    SmiParseError,
    parse_amd_smi_static,
    parse_mib,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
    parse_rocm_smi_json,
)


def test_nvidia_xml_h100() -> None:
    view = parse_nvidia_smi_xml(smi_text("nvidia-smi-q-x-h100.xml"))
    assert view.tool == "nvidia-smi"
    assert view.driver_version == "570.124.06"
    assert view.runtime_version == "12.8"
    (gpu,) = view.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_mib == 81559
    assert gpu.uuid == "GPU-6f7c1d5e-2b9a-4c8e-9d31-0a4b5c6d7e81"
    assert gpu.pci_bus_id == "00000000:18:00.0"
    assert gpu.arch is None  # the XML carries no compute capability


def test_nvidia_xml_b200_pair_in_index_order() -> None:
    view = parse_nvidia_smi_xml(smi_text("nvidia-smi-q-x-b200x2.xml"))
    assert [g.index for g in view.gpus] == [0, 1]
    assert {g.name for g in view.gpus} == {"NVIDIA B200"}
    assert view.driver_version == "575.57.08"


def test_nvidia_xml_h200_memory() -> None:
    assert parse_nvidia_smi_xml(smi_text("nvidia-smi-q-x-h200.xml")).gpus[0].memory_mib == 143771


def test_nvidia_csv_with_units_and_compute_cap() -> None:
    view = parse_nvidia_smi_csv(smi_text("nvidia-smi-query-gpu-h100x2.csv"))
    assert len(view.gpus) == 2
    assert view.driver_version == "570.124.06"
    assert all(g.arch == "sm_90" and g.memory_mib == 81559 for g in view.gpus)
    assert view.gpus[1].uuid == "GPU-1e2d3c4b-5a69-4788-9a0b-c1d2e3f4a5b6"


def test_nvidia_csv_nounits() -> None:
    view = parse_nvidia_smi_csv("index, name, memory.total [MiB]\n0, NVIDIA H200, 143771\n")
    assert view.gpus[0].memory_mib == 143771


def test_amd_smi_static_mi300x() -> None:
    view = parse_amd_smi_static(smi_text("amd-smi-static-mi300x.json"))
    (gpu,) = view.gpus
    assert (gpu.name, gpu.arch, gpu.memory_mib) == ("AMD Instinct MI300X", "gfx942", 196592)
    assert view.driver_version == "6.8.5"
    assert gpu.pci_bus_id == "0000:05:00.0"


def test_amd_smi_older_string_sizes_and_gpu_data_wrapper() -> None:
    text = (
        '{"gpu_data": [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X"}, '
        '"vram": {"size": "196592 MB"}}]}'
    )
    assert parse_amd_smi_static(text).gpus[0].memory_mib == 196592


def test_rocm_smi_productname() -> None:
    view = parse_rocm_smi_json(smi_text("rocm-smi-showproductname-mi300x.json"))
    (gpu,) = view.gpus
    assert (gpu.index, gpu.name, gpu.arch) == (0, "AMD Instinct MI300X", "gfx942")
    assert view.driver_version == "6.8.5"


@pytest.mark.parametrize(
    ("parser", "text", "needle"),
    [
        (parse_nvidia_smi_xml, "NVIDIA-SMI has failed because it couldn't communicate", "not XML"),
        (parse_nvidia_smi_xml, "<other/>", "expected <nvidia_smi_log>"),
        (parse_amd_smi_static, "{not json", "not JSON"),
        (parse_amd_smi_static, '{"a": 1}', "expected a list"),
        (parse_rocm_smi_json, "[]", "expected an object"),
        (parse_nvidia_smi_csv, "", "empty output"),
    ],
)
def test_garbage_is_a_clear_error(parser, text: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SmiParseError, match=needle):
        parser(text)


def test_parse_mib_units() -> None:
    assert parse_mib("2 GiB") == 2048
    assert parse_mib("512 KiB") == 0.5
    assert parse_mib("N/A") is None


def test_the_validators_xml_path_refuses_entities() -> None:
    # the stdlib parser this module used before expanded internal entities (billion laughs)
    laughs = '<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
    text = laughs + "<nvidia_smi_log><driver_version>&b;</driver_version><gpu/></nvidia_smi_log>"
    with pytest.raises(SmiParseError, match="refused"):
        parse_nvidia_smi_xml(text)
