"""How the vendor tools print a value: ``"81559 MiB"``, ``"16x"``, ``"300.00 W"``, ``"0 %"``, ``"N/A"``.

Every reader returns ``None`` for a value the tool did not print.  Text readers keep the tool's
``"N/A"`` as :data:`NOT_APPLICABLE` (the card lacks the feature); number readers cannot hold it and
return ``None`` there too.
"""

from __future__ import annotations

import re

from envbuild.models.hardware import NOT_APPLICABLE

# nvidia-smi and amd-smi print "N/A"; rocm-smi prints "N/A" or "Not supported"; NVML says "Not Supported".
_NA = {"n/a", "not supported", "not available", "[not supported]", "not applicable"}

_NUMBER = re.compile(r"^\s*([-+]?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z%/]*)\s*$")
_TO_MIB = {
    "kib": 1 / 1024,
    "kb": 1 / 1024,
    "mib": 1.0,
    "mb": 1.0,
    "gib": 1024.0,
    "gb": 1024.0,
    "b": 1 / 2**20,
}


def is_na(text: object) -> bool:
    return isinstance(text, str) and text.strip().lower() in _NA


def text(value: object) -> str | None:
    """A string fact: ``None`` when absent or blank, :data:`NOT_APPLICABLE` for the tool's "N/A"."""
    if value is None:
        return None
    out = str(value).strip()
    if not out:
        return None
    return NOT_APPLICABLE if is_na(out) else out


def number(value: object) -> float | None:
    """``"300.00 W"`` -> 300.0, ``"0 %"`` -> 0.0, ``42`` -> 42.0; "N/A" and other words -> None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    m = _NUMBER.match(value)
    return float(m.group(1)) if m else None


def integer(value: object) -> int | None:
    got = number(value)
    return int(got) if got is not None and got == int(got) else None


def mib(value: object, default_unit: str = "MiB") -> float | None:
    """``"81559 MiB"`` -> 81559.0; MB is read as MiB (the vendor tools print MiB values labelled MB)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) * _TO_MIB.get(default_unit.lower(), 1.0)
    if not isinstance(value, str):
        return None
    m = _NUMBER.match(value)
    if not m:
        return None
    unit = (m.group(2) or default_unit).lower()
    if unit not in _TO_MIB:
        return None
    return float(m.group(1)) * _TO_MIB[unit]


def width(value: object) -> int | None:
    """PCIe lanes: nvidia-smi prints ``"16x"``, rocm-smi ``"x16"`` or ``16``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\s*x?\s*([0-9]+)\s*x?\s*", value, re.IGNORECASE)
    return int(m.group(1)) if m else None


def yes_no(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    low = value.strip().lower()
    if low in ("yes", "true", "active", "enabled"):
        return True
    if low in ("no", "false", "not active", "disabled"):
        return False
    return None


def pci_id(value: object) -> str | None:
    """nvidia-smi's ``pci_device_id`` ``"0x233010DE"`` (device 0x2330, vendor 0x10DE) -> ``"10de:2330"``.

    The same packing serves ``pci_sub_system_id``: ``"0x16C110DE"`` -> ``"10de:16c1"``.
    """
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\s*(?:0x)?([0-9a-fA-F]{8})\s*", value)
    if not m:
        return None
    packed = m.group(1).lower()
    if "0000" in (packed[:4], packed[4:]):  # "000000DE": a capture with its ids blanked out
        return None
    return f"{packed[4:]}:{packed[:4]}"


def hex_id(value: object) -> str | None:
    """``"0x74a1"`` / ``"74A1"`` / ``29857`` -> ``"74a1"`` (four hex digits), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:04x}"
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\s*(?:0x)?([0-9a-fA-F]{1,4})\s*", value)
    return m.group(1).lower().zfill(4) if m else None
