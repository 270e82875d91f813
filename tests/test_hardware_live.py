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
