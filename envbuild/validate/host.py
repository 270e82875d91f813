"""Facts gathered by the validator itself (not in the interpreter under test): the vendor tools'
outputs, the NVIDIA driver through NVML (nvidia-ml-py), host memory.  Each raw output is kept
for the report's raw-facts files.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field

from envbuild.hardware.live import nvml_errors, nvml_session
from envbuild.validate.smi import (
    SmiParseError,
    SmiView,
    parse_amd_smi_static,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
    parse_rocm_smi_json,
)

TOOL_TIMEOUT_S = 30.0


@dataclass
class GpuToolFacts:
    views: list[SmiView] = field(default_factory=list)
    raw: dict[str, str] = field(default_factory=dict)  # report file name -> tool output
    errors: list[str] = field(default_factory=list)
    nvml_driver: str | None = None
    nvml_device_count: int | None = None


def _run_tool(argv: list[str]) -> tuple[str | None, str | None]:
    if shutil.which(argv[0]) is None:
        return None, None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(argv)} did not answer within {TOOL_TIMEOUT_S:g} s"
    except OSError as exc:
        return None, f"{' '.join(argv)}: {exc.strerror or exc}"
    if proc.returncode != 0:
        msg = (proc.stdout + proc.stderr).strip().splitlines()
        return None, f"{' '.join(argv)} exited {proc.returncode}: {msg[-1] if msg else ''}"
    return proc.stdout, None


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
    plain, _ = _run_tool(["nvidia-smi"])
    if plain is not None:
        facts.raw["nvidia-smi.txt"] = plain
    query = "--query-gpu=index,name,uuid,driver_version,memory.total,compute_cap,pci.bus_id"
    specs = [  # the CSV first: it carries the compute capability the XML lacks
        (["nvidia-smi", query, "--format=csv"], "nvidia-smi-query.csv", parse_nvidia_smi_csv),
        (["nvidia-smi", "-q", "-x"], "nvidia-smi.xml", parse_nvidia_smi_xml),
        (["amd-smi", "static", "--json"], "amd-smi.json", parse_amd_smi_static),
        (
            ["rocm-smi", "--showproductname", "--showdriverversion", "--json"],
            "rocm-smi.json",
            parse_rocm_smi_json,
        ),
    ]
    for argv, filename, parser in specs:
        out, err = _run_tool(argv)
        if err:
            facts.errors.append(err)
        if out is None:
            continue
        facts.raw[filename] = out
        try:
            facts.views.append(parser(out))
        except SmiParseError as exc:
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
