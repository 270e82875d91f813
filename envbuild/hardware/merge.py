"""Several captures of one machine as one reading (``check --smi A --smi B``).

Each capture is read for what it holds: a fact one capture leaves unreported (None) is taken from the
next that reports it, so the plain ``nvidia-smi`` table plus ``nvidia-smi -q -x`` judge as much as the
XML alone.  Devices are matched by PCI bus id, else UUID, else index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar

from envbuild.models.hardware import DeviceFacts, HardwareFacts

T = TypeVar("T")


def _fill(first: T, other: T) -> T:
    """``first`` with each None field (recursively in nested records) taken from ``other``."""
    changes: dict[str, Any] = {}
    for f in fields(first):  # type: ignore[arg-type]  # records only
        mine, theirs = getattr(first, f.name), getattr(other, f.name)
        if mine is None and theirs is not None:
            changes[f.name] = theirs
        elif is_dataclass(mine) and not isinstance(mine, type) and theirs is not None:
            changes[f.name] = _fill(mine, theirs)
    return replace(first, **changes) if changes else first  # type: ignore[type-var]


def _bus(bus: str | None) -> str | None:
    """``00000000:18:00.0`` and ``0000:18:00.0`` are one bus id: the domain's leading zeros dropped."""
    if not bus:
        return None
    domain, _, rest = bus.lower().rpartition(":")
    head, _, slot = domain.rpartition(":")
    return f"{int(head or '0', 16)}:{slot}:{rest}" if slot else bus.lower()


def _same(a: DeviceFacts, b: DeviceFacts) -> bool:
    if _bus(a.pci_bus_id) and _bus(b.pci_bus_id):
        return _bus(a.pci_bus_id) == _bus(b.pci_bus_id)
    if a.uuid and b.uuid:
        return a.uuid.lower() == b.uuid.lower()
    return a.index == b.index


def merge(readings: Sequence[HardwareFacts]) -> HardwareFacts:
    """One reading of the machine from ``readings`` (in the order given: the first's facts win)."""
    if not readings:
        raise ValueError("merge needs at least one reading")
    merged = readings[0]
    for other in readings[1:]:
        devices = list(merged.devices)
        for dev in other.devices:
            at = next((i for i, mine in enumerate(devices) if _same(mine, dev)), None)
            if at is None:
                devices.append(dev)
            else:
                devices[at] = _fill(devices[at], dev)
        facts = _fill(replace(merged, devices=()), replace(other, devices=()))
        merged = replace(facts, devices=tuple(devices))
    paths = [r.path for r in readings if r.path]
    return replace(merged, path=", ".join(paths) or None)


def sources(readings: Sequence[HardwareFacts]) -> str:
    """``nvidia-smi -q -x (a.xml) + nvidia-smi table (b.txt)``."""
    return " + ".join(f"{r.source}{f' ({r.path})' if r.path else ''}" for r in readings)
