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
