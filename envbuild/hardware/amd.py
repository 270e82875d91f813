"""AMD's tools: ``amd-smi static --json``, ``amd-smi metric --json`` and ``rocm-smi ... --json``.

amd-smi prints a list of ``{"gpu": N, ...}`` objects (ROCm 6.3 and earlier) or ``{"gpu_data": [...]}``
(later); sizes are ``{"value": 196592, "unit": "MB"}`` or, in older releases, ``"196592 MB"``.  ``static``
holds the identity, the maximum PCIe link, the power cap and the partition modes; ``metric`` the
current link, use, memory in use and ECC counts.  rocm-smi prints an object keyed ``card0``, ``card1``
... plus ``system`` (driver version, ``PIDnnn`` process rows), every value a string.
"""

from __future__ import annotations

import json
import re
from typing import Any

from envbuild.errors import CaptureError
from envbuild.hardware import values as v
from envbuild.hardware.parse_guard import capture_parser, unreadable
from envbuild.models.hardware import DeviceFacts, EccState, GpuProcess, HardwareFacts, PcieLink

AMD_VENDOR = "1002"
# PCIe transfer rate per lane (GT/s) -> generation
_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def load_json(text: str, path: str | None, tool: str) -> Any:
    name = path or "<input>"
    if not text.strip():
        raise CaptureError(f"{name}: empty capture: `{tool}` prints a JSON document")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        why = "truncated" if exc.pos >= len(text.rstrip()) else "not JSON"
        raise CaptureError(f"{name}: {why} `{tool}` capture ({exc.msg} at line {exc.lineno})") from None
    except RecursionError as exc:  # "[" * 100000: json.loads recurses once per level
        raise unreadable(path, tool, exc) from None


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _first(obj: dict[str, Any], *keys: str) -> Any:
    return next((obj[k] for k in keys if obj.get(k) is not None), None)


def _unit_value(value: Any) -> Any:
    """``{"value": 750, "unit": "W"}`` -> ``"750 W"``; anything else unchanged."""
    if isinstance(value, dict) and "value" in value:
        return f"{value['value']} {value.get('unit', '')}".strip()
    return value


def _gen(gts: Any) -> int | None:
    rate = v.number(_unit_value(gts))
    return _GEN_BY_GTS.get(rate) if rate is not None else None


def amd_smi_entries(data: Any) -> list[dict[str, Any]] | None:
    """The per-GPU objects of an amd-smi JSON document, or None when it is not one."""
    entries = data.get("gpu_data") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        return None
    if all(isinstance(e, dict) and isinstance(e.get("gpu"), int) for e in entries):
        return entries
    return None


def _amd_device(n: int, entry: dict[str, Any]) -> DeviceFacts:
    asic = entry.get("asic") or {}
    bus = entry.get("bus") or {}
    limit = entry.get("limit") or {}
    metric_pcie = entry.get("pcie") or {}
    ecc = entry.get("ecc") or {}
    partition = entry.get("partition") or {}
    mem = entry.get("mem_usage") or {}
    device = v.hex_id(asic.get("device_id"))
    vendor = v.hex_id(asic.get("vendor_id")) or AMD_VENDOR
    sub_vendor, sub_device = v.hex_id(asic.get("subvendor_id")), v.hex_id(asic.get("subsystem_id"))
    power_cap = _first(limit, "socket_power", "power_cap") or _get(limit, "ppt0", "socket_power_limit")
    return DeviceFacts(
        index=entry.get("gpu", n),
        name=str(asic.get("market_name") or ""),
        uuid=v.text(asic.get("asic_serial")) if not v.is_na(asic.get("asic_serial")) else None,
        pci_bus_id=v.text(bus.get("bdf")),
        pci_device_id=f"{vendor}:{device}" if device else None,
        pci_subsystem_id=f"{sub_vendor}:{sub_device}" if sub_vendor and sub_device else None,
        arch=v.text(asic.get("target_graphics_version")),
        memory_total_mib=v.mib(_unit_value(_get(entry, "vram", "size") or mem.get("total_vram"))),
        memory_used_mib=v.mib(_unit_value(mem.get("used_vram"))),
        utilization_gpu_pct=v.number(_unit_value(_get(entry, "usage", "gfx_activity"))),
        compute_partition=v.text(partition.get("compute_partition")),
        memory_partition=v.text(partition.get("memory_partition")),
        ecc=EccState(
            volatile_uncorrectable=v.integer(ecc.get("total_uncorrectable_count")),
            volatile_correctable=v.integer(ecc.get("total_correctable_count")),
        ),
        pcie=PcieLink(
            gen_current=_gen(metric_pcie.get("speed")),
            gen_max=_gen(bus.get("max_pcie_speed")),
            width_current=v.width(metric_pcie.get("width")),
            width_max=v.width(bus.get("max_pcie_width")),
        ),
        power_limit_w=v.number(_unit_value(power_cap)),
    )


@capture_parser("amd-smi --json")
def parse_amd_smi(text: str, path: str | None = None) -> HardwareFacts:
    """``amd-smi static --json`` or ``amd-smi metric --json``: each fills the facts it holds."""
    data = load_json(text, path, "amd-smi --json")
    entries = amd_smi_entries(data)
    if entries is None:
        raise CaptureError(
            f"{path or '<input>'}: not an `amd-smi --json` capture: expected a list of "
            '{"gpu": N, ...} objects (or {"gpu_data": [...]})'
        )
    drivers = [_get(e, "driver", "version") for e in entries]
    return HardwareFacts(
        source="amd-smi",
        vendor="amd",
        path=path,
        driver_version=next((str(d) for d in drivers if d and not v.is_na(d)), None),
        devices=tuple(_amd_device(n, e) for n, e in enumerate(entries)),
    )


def is_rocm_smi(data: Any) -> bool:
    return isinstance(data, dict) and any(re.fullmatch(r"card\d+", str(k)) for k in data)


def _rocm_pcie(level: Any) -> tuple[int | None, int | None]:
    """``"pcie clock level": "1 (16.0GT/s x16)"`` -> (gen 4, 16 lanes): the link in use now."""
    m = re.search(r"([0-9.]+)\s*GT/s\s*x(\d+)", str(level or ""))
    if not m:
        return None, None
    return _GEN_BY_GTS.get(float(m.group(1))), int(m.group(2))


def _rocm_processes(system: dict[str, Any]) -> tuple[GpuProcess, ...] | None:
    """``--showpids`` rows ``"PID104225": "name, gpus, vram bytes, sdma, cu occupancy"``."""
    rows = [(k, val) for k, val in system.items() if re.fullmatch(r"PID\d+", str(k))]
    if not rows:
        return None  # rocm-smi prints no row when none runs, and none when --showpids was not asked
    out = []
    for key, val in rows:
        parts = [p.strip() for p in str(val).split(",")]
        used = v.integer(parts[2]) if len(parts) > 2 else None
        out.append(
            GpuProcess(
                pid=int(key[3:]), name=parts[0], used_memory_mib=used / 2**20 if used is not None else None
            )
        )
    return tuple(out)


def _rocm_device(index: int, card: dict[str, Any], processes: tuple[GpuProcess, ...] | None) -> DeviceFacts:
    gen, lanes = _rocm_pcie(card.get("pcie clock level"))
    device = v.hex_id(_first(card, "Device ID", "GPU ID"))
    total, used = card.get("VRAM Total Memory (B)"), card.get("VRAM Total Used Memory (B)")
    name = _first(card, "Card Series", "Card series", "Device Name", "Card SKU")
    return DeviceFacts(
        index=index,
        name=str(name or ""),
        uuid=None if v.is_na(card.get("Unique ID")) else v.text(card.get("Unique ID")),
        pci_bus_id=v.text(card.get("PCI Bus")),
        pci_device_id=f"{AMD_VENDOR}:{device}" if device else None,
        arch=v.text(card.get("GFX Version")),
        memory_total_mib=v.mib(total, "B") if total is not None else None,
        memory_used_mib=v.mib(used, "B") if used is not None else None,
        utilization_gpu_pct=v.number(card.get("GPU use (%)")),
        compute_partition=v.text(card.get("Compute Partition")),
        memory_partition=v.text(card.get("Memory Partition")),
        pcie=PcieLink(gen_current=gen, width_current=lanes),
        power_limit_w=v.number(_first(card, "Max Graphics Package Power (W)", "Power Cap (W)")),
        processes=processes,
    )


@capture_parser("rocm-smi --json")
def parse_rocm_smi(text: str, path: str | None = None) -> HardwareFacts:
    """``rocm-smi [--showproductname --showbus --showmeminfo vram --showuse --showpids ...] --json``."""
    data = load_json(text, path, "rocm-smi --json")
    if not is_rocm_smi(data):
        raise CaptureError(
            f"{path or '<input>'}: not a `rocm-smi --json` capture: "
            "expected an object keyed card0, card1, ..."
        )
    system = data.get("system") if isinstance(data.get("system"), dict) else {}
    cards = sorted(
        (int(k[4:]), c) for k, c in data.items() if re.fullmatch(r"card\d+", k) and isinstance(c, dict)
    )
    # the process rows are machine-wide: they belong to a device only when there is one
    processes = _rocm_processes(system) if len(cards) == 1 else None
    return HardwareFacts(
        source="rocm-smi",
        vendor="amd",
        path=path,
        driver_version=v.text(system.get("Driver version")),
        devices=tuple(_rocm_device(n, card, processes) for n, card in cards),
    )
