"""The validator's identity view of the GPUs (:class:`SmiView`) from the vendor tools' outputs:
``nvidia-smi -q -x``, ``amd-smi static --json`` and ``rocm-smi --json`` through the parsers of
:mod:`envbuild.hardware` (every fact they read is in :class:`HardwareFacts`), and ``nvidia-smi
--query-gpu`` CSV, the one output that carries the compute capability.  Pure functions over text.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from envbuild.errors import CaptureError
from envbuild.hardware.amd import parse_amd_smi, parse_rocm_smi
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.hardware.values import mib
from envbuild.models.hardware import HardwareFacts

# A vendor tool printed something that is not its documented format (the capture errors of
# envbuild.hardware, whose messages name the tool's command in place of a file).
SmiParseError = CaptureError


@dataclass(frozen=True, kw_only=True)
class SmiGpu:
    index: int
    name: str
    memory_mib: float | None = None
    uuid: str | None = None
    arch: str | None = None  # "sm_90" / "gfx942" when the tool reports it
    pci_bus_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class SmiView:
    tool: str  # "nvidia-smi", "amd-smi", "rocm-smi"
    driver_version: str | None = None
    runtime_version: str | None = None  # CUDA version the driver supports / ROCm version
    gpus: tuple[SmiGpu, ...] = ()


def parse_mib(text: str | None) -> float | None:
    """``"81559 MiB"`` -> 81559.0; MB is read as MiB (the vendor tools print MiB values labelled MB)."""
    return mib(text)


def _cc_to_arch(cc: str | None) -> str | None:
    if not cc or not re.fullmatch(r"\d+\.\d+", cc.strip()):
        return None
    major, minor = cc.strip().split(".")
    return f"sm_{major}{minor}"


def view_of(facts: HardwareFacts) -> SmiView:
    """The validator's identity view of a vendor tool's facts (:mod:`envbuild.hardware`)."""
    tool = "nvidia-smi" if facts.vendor == "nvidia" else facts.source
    return SmiView(
        tool=tool,
        driver_version=facts.driver_version,
        runtime_version=facts.runtime_version,
        gpus=tuple(
            SmiGpu(
                index=d.index,
                name=d.name,
                memory_mib=d.memory_total_mib,
                uuid=d.uuid,
                arch=d.arch,
                pci_bus_id=d.pci_bus_id,
            )
            for d in facts.devices
        ),
    )


def parse_nvidia_smi_xml(text: str) -> SmiView:
    """``nvidia-smi -q -x``, parsed by :func:`envbuild.hardware.nvidia_xml.parse_nvidia_xml` (defusedxml)."""
    return view_of(parse_nvidia_xml(text, "nvidia-smi -q -x"))


def parse_nvidia_smi_csv(text: str) -> SmiView:
    """``nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,compute_cap --format=csv``."""
    rows = list(csv.reader(io.StringIO(text.strip()), skipinitialspace=True))
    if not rows:
        raise SmiParseError("nvidia-smi --query-gpu: empty output")
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in rows[0]]
    if "name" not in header:
        raise SmiParseError(f"nvidia-smi --query-gpu: no 'name' column in header {rows[0]}")
    gpus, driver = [], None
    for n, row in enumerate(rows[1:]):
        rec = dict(zip(header, (c.strip() for c in row), strict=False))
        mem = rec.get("memory.total")
        if mem and not re.search(r"[A-Za-z]", mem):
            mem += " MiB"  # nounits
        driver = rec.get("driver_version") or driver
        gpus.append(
            SmiGpu(
                index=int(rec["index"]) if rec.get("index", "").isdigit() else n,
                name=rec["name"],
                memory_mib=parse_mib(mem),
                uuid=rec.get("uuid"),
                arch=_cc_to_arch(rec.get("compute_cap")),
                pci_bus_id=rec.get("pci.bus_id"),
            )
        )
    return SmiView(tool="nvidia-smi", driver_version=driver, gpus=tuple(gpus))


def parse_amd_smi_static(text: str) -> SmiView:
    return view_of(parse_amd_smi(text, "amd-smi static --json"))


def parse_rocm_smi_json(text: str) -> SmiView:
    """``rocm-smi --showproductname --json`` (optionally merged with ``--showdriverversion``)."""
    return view_of(parse_rocm_smi(text, "rocm-smi --json"))
