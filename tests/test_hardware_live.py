"""Live facts without a GPU here: NVML does not initialise, so nvidia-smi -q -x answers (a script on PATH
that prints a real capture, run as a real subprocess)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from envbuild.hardware import live

CAPTURE = Path(__file__).parent / "fixtures" / "smi" / "real" / "nvidia-smi-q-x" / "tesla-t4.xml"


def test_nvidia_smi_answers_when_nvml_does_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f'#!/bin/sh\n[ "$1 $2" = "-q -x" ] && exec cat {CAPTURE}\nexit 9\n', encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(live, "nvml_facts", lambda: None)  # as on a machine without libnvidia-ml.so.1
    got = live.nvidia_facts()
    assert got is not None
    assert (got.source, got.path, got.devices[0].name) == ("nvidia-smi -q -x", "nvidia-smi -q -x", "Tesla T4")


def test_no_vendor_tool_is_no_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert live.amd_facts() is None
    assert live.nvml_facts() is None  # pynvml imports; nvmlInit fails without a driver


def test_the_host_stage_driver_reads_nvml_through_nvidia_ml_py() -> None:
    """validate/host.py's driver fact uses the same binding; without a driver it is (None, None), and
    nothing is left initialised (a second call behaves the same)."""
    from envbuild.validate.host import nvml_driver

    assert nvml_driver() == (None, None)
    assert nvml_driver() == (None, None)


def test_the_loaded_library_is_read_from_the_process_maps(tmp_path: Path) -> None:
    """Provenance names the libnvidia-ml.so.1 the process mapped: a driver's versioned file, or a
    stand-in's path (tests/test_hardware_nvml.py reads the stand-in's through NVML)."""
    maps = tmp_path / "maps"
    maps.write_text(
        "7f0000000000-7f0000001000 r--p 00000000 00:00 0          [heap]\n"
        "7f1000000000-7f1000100000 r-xp 00000000 08:01 123  "
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20\n",
        encoding="utf-8",
    )
    assert live.loaded_library(maps) == "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20"
    maps.write_text("7f0000000000-7f0000001000 r--p 00000000 00:00 0          [heap]\n", encoding="utf-8")
    assert live.loaded_library(maps) is None
    assert live.loaded_library(tmp_path / "absent") is None


def test_the_binding_is_named_by_its_distribution() -> None:
    from importlib.metadata import version

    import pynvml

    assert live.binding_name(pynvml) == f"nvidia-ml-py {version('nvidia-ml-py')}"
    other = type("Module", (), {"__file__": "/elsewhere/pynvml.py"})()
    assert live.binding_name(other).startswith("pynvml from /elsewhere/pynvml.py (not nvidia-ml-py ")


def test_amd_smi_static_and_metric_are_read_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`amd-smi static` holds the identity and the maximum link, `amd-smi metric` the use, the memory in
    use, the current link and the ECC counts: both are read, so an MI300X is judged under load.  The two
    documents are transcribed (tests/fixtures/smi/README.md), served by a script named amd-smi on PATH."""
    smi = Path(__file__).parent / "fixtures" / "smi"
    tool = tmp_path / "amd-smi"
    tool.write_text(
        "#!/bin/sh\n"
        f'[ "$1 $2" = "static --json" ] && exec cat {smi / "amd-smi-static-mi300x.json"}\n'
        f'[ "$1 $2" = "metric --json" ] && exec cat {smi / "amd-smi-metric-mi300x.json"}\n'
        "exit 2\n",
        encoding="utf-8",
    )
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    got = live.amd_facts()
    assert got is not None
    (dev,) = got.devices
    assert (dev.name, dev.arch, dev.pcie.gen_max, dev.power_limit_w) == (
        "AMD Instinct MI300X",
        "gfx942",
        5,
        750,
    )
    assert (dev.utilization_gpu_pct, dev.pcie.gen_current, dev.ecc.volatile_correctable) == (100, 4, 3)
    assert dev.memory_used_mib is not None and dev.memory_used_mib > 170_000

    from envbuild.catalog import load_catalog
    from envbuild.hardware.rules import Order, judge

    catalog = load_catalog()
    mi300x = catalog.card("mi300x")
    assert mi300x is not None
    codes = [f.code for f in judge(got, Order(targets=(mi300x,)), catalog)]
    assert "W-HW-PCIE-GEN" in codes  # gen 4 of 5 under load: judged only because metric was read
