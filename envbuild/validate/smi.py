"""Parse the vendor tools' views of the GPUs: ``nvidia-smi -q -x``, ``nvidia-smi --query-gpu`` CSV,
``amd-smi static --json`` and ``rocm-smi --showproductname --json``.  Pure functions over text.
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

from envbuild.errors import EnvbuildError


class SmiParseError(EnvbuildError):
    """A vendor tool printed something that is not the documented format."""


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


_MEM = re.compile(r"^\s*([0-9.]+)\s*([KMGT]i?B)?\s*$", re.IGNORECASE)
_UNIT_MIB = {"kib": 1 / 1024, "kb": 1 / 1024, "mib": 1.0, "mb": 1.0, "gib": 1024.0, "gb": 1024.0}


def parse_mib(text: str | None) -> float | None:
    """``"81559 MiB"`` -> 81559.0; MB is read as MiB (the vendor tools print MiB values labelled MB)."""
    if text is None:
        return None
    m = _MEM.match(str(text))
    if not m:
        return None
    return float(m.group(1)) * _UNIT_MIB.get((m.group(2) or "MiB").lower(), 1.0)


def _cc_to_arch(cc: str | None) -> str | None:
    if not cc or not re.fullmatch(r"\d+\.\d+", cc.strip()):
        return None
    major, minor = cc.strip().split(".")
    return f"sm_{major}{minor}"


def parse_nvidia_smi_xml(text: str) -> SmiView:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SmiParseError(f"nvidia-smi -q -x: not XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise SmiParseError(f"nvidia-smi -q -x: root element is <{root.tag}>, expected <nvidia_smi_log>")
    gpus = []
    for i, gpu in enumerate(root.findall("gpu")):
        minor = gpu.findtext("minor_number")
        gpus.append(
            SmiGpu(
                index=int(minor) if minor and minor.isdigit() else i,
                name=(gpu.findtext("product_name") or "").strip(),
                memory_mib=parse_mib(gpu.findtext("fb_memory_usage/total")),
                uuid=gpu.findtext("uuid"),
                arch=_cc_to_arch(gpu.findtext("compute_cap")),
                pci_bus_id=gpu.get("id"),
            )
        )
    return SmiView(
        tool="nvidia-smi",
        driver_version=(root.findtext("driver_version") or "").strip() or None,
        runtime_version=(root.findtext("cuda_version") or "").strip() or None,
        gpus=tuple(sorted(gpus, key=lambda g: g.index)),
    )


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


def _load_json(text: str, tool: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SmiParseError(f"{tool}: not JSON ({exc.msg} at line {exc.lineno})") from None


def _field(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _sized(value: Any) -> float | None:
    """amd-smi prints sizes as ``{"value": 196592, "unit": "MB"}`` (ROCm >= 6.2) or ``"196592 MB"``."""
    if isinstance(value, dict):
        return parse_mib(f"{value.get('value')} {value.get('unit', 'MB')}")
    if isinstance(value, (int, float)):
        return float(value)
    return parse_mib(value) if isinstance(value, str) else None


def parse_amd_smi_static(text: str) -> SmiView:
    data = _load_json(text, "amd-smi static --json")
    entries = data.get("gpu_data", data) if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise SmiParseError("amd-smi static --json: expected a list of GPUs (or {'gpu_data': [...]})")
    gpus, driver = [], None
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SmiParseError(f"amd-smi static --json: entry {n} is not an object")
        asic = entry.get("asic") or {}
        driver = _field(entry, "driver", "version") or driver
        gpus.append(
            SmiGpu(
                index=int(entry.get("gpu", n)),
                name=str(asic.get("market_name") or ""),
                memory_mib=_sized(_field(entry, "vram", "size")),
                uuid=_field(entry, "asic", "asic_serial") or None,
                arch=asic.get("target_graphics_version") or None,
                pci_bus_id=_field(entry, "bus", "bdf") or None,
            )
        )
    return SmiView(tool="amd-smi", driver_version=driver, gpus=tuple(gpus))


def parse_rocm_smi_json(text: str) -> SmiView:
    """``rocm-smi --showproductname --json`` (optionally merged with ``--showdriverversion``)."""
    data = _load_json(text, "rocm-smi --json")
    if not isinstance(data, dict):
        raise SmiParseError("rocm-smi --json: expected an object keyed by card")
    gpus = []
    for key, card in data.items():
        m = re.fullmatch(r"card(\d+)", key)
        if not m or not isinstance(card, dict):
            continue
        gfx = card.get("GFX Version")
        gpus.append(
            SmiGpu(
                index=int(m.group(1)),
                name=str(card.get("Card Series") or card.get("Card series") or ""),
                arch=gfx if isinstance(gfx, str) and gfx.startswith("gfx") else None,
                uuid=card.get("Unique ID") or card.get("GUID"),
            )
        )
    driver = _field(data, "system", "Driver version")
    return SmiView(tool="rocm-smi", driver_version=driver, gpus=tuple(sorted(gpus, key=lambda g: g.index)))
