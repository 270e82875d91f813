"""Facts gathered by the validator itself (not in the interpreter under test): the vendor tools'
outputs, the NVIDIA driver through NVML (nvidia-ml-py), host memory.  Each raw output is kept
for the report's raw-facts files.

The tools run through :func:`envbuild.hardware.tools.run_tool` and are read by the parsers of
:mod:`envbuild.hardware` into :class:`HardwareFacts` (one reading per tool that answered), which the
accelerator, devices and Blender stages read directly.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field

from envbuild.errors import CaptureError
from envbuild.hardware.amd import parse_amd_smi, parse_rocm_smi
from envbuild.hardware.live import nvml_errors, nvml_session
from envbuild.hardware.nvidia_query import QUERY, parse_query_gpu
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.hardware.parse_guard import Parser
from envbuild.hardware.tools import run_tool
from envbuild.models.hardware import HardwareFacts

# What the validator asks, in order, with the raw file each output is kept as.  The CSV first: it
# carries the compute capability the XML lacks, so the devices stage compares torch's arch with it.
TOOLS: tuple[tuple[tuple[str, ...], str, Parser], ...] = (
    (QUERY, "nvidia-smi-query.csv", parse_query_gpu),
    (("nvidia-smi", "-q", "-x"), "nvidia-smi.xml", parse_nvidia_xml),
    (("amd-smi", "static", "--json"), "amd-smi.json", parse_amd_smi),
    (("rocm-smi", "--showproductname", "--showdriverversion", "--json"), "rocm-smi.json", parse_rocm_smi),
)


@dataclass
class GpuToolFacts:
    readings: list[HardwareFacts] = field(default_factory=list)  # one per tool that answered, in TOOLS order
    raw: dict[str, str] = field(default_factory=dict)  # report file name -> tool output
    errors: list[str] = field(default_factory=list)  # a tool that failed, hung, or printed unreadable output
    nvml_driver: str | None = None
    nvml_device_count: int | None = None


def nvml_driver() -> tuple[str | None, int | None]:
    """The NVIDIA driver version and device count through NVML (``nvidia-ml-py``), or (None, None) where
    it does not initialise (no driver, no GPU, libnvidia-ml.so.1 not mounted)."""
    with nvml_session() as nv:
        if nv is None:
            return None, None
        try:
            version = nv.nvmlSystemGetDriverVersion()
            count = nv.nvmlDeviceGetCount()
        except nvml_errors(nv):  # NVML's error, or a binding that does not match the library
            return None, None
    text = version.decode() if isinstance(version, bytes) else str(version)
    return text or None, int(count)


def collect_gpu_tools() -> GpuToolFacts:
    facts = GpuToolFacts()
    facts.nvml_driver, facts.nvml_device_count = nvml_driver()
    plain = run_tool(["nvidia-smi"])
    if plain.output is not None:
        facts.raw["nvidia-smi.txt"] = plain.output
    for argv, filename, parse in TOOLS:
        ran = run_tool(argv)
        if ran.error:
            facts.errors.append(ran.error)
        if ran.output is None:
            continue
        facts.raw[filename] = ran.output
        try:
            facts.readings.append(parse(ran.output, ran.command))
        except CaptureError as exc:
            facts.errors.append(str(exc))
    return facts


def mem_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_facts() -> dict[str, object]:
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "mem_available_bytes": mem_available_bytes(),
        "validator_python": platform.python_version(),
    }
