"""``nvidia-smi --query-gpu=... --format=csv``: the one NVIDIA output that carries the compute
capability (``compute_cap``, driver 510 and later), which ``nvidia-smi -q -x`` lacks.

The validator asks for :data:`QUERY` and compares what it reads with what torch sees (the devices
stage).  Any subset of the columns is read, with or without ``nounits`` (``81559 MiB`` or ``81559``
under a ``memory.total [MiB]`` header); ``name`` is required.  ``compute_cap`` becomes the device's
``arch`` (``9.0`` -> ``sm_90``).  A value nvidia-smi cannot give prints as ``[N/A]`` or
``[Not Supported]``: the fact is then not reported (``None``).
"""

from __future__ import annotations

import csv
import io
import re

from envbuild.errors import CaptureError
from envbuild.hardware import values as v
from envbuild.hardware.parse_guard import capture_parser
from envbuild.models.hardware import NOT_APPLICABLE, DeviceFacts, HardwareFacts

FORMAT = "nvidia-smi --query-gpu"
FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "compute_cap", "pci.bus_id")
# The command the validator runs (the raw output is kept as nvidia-smi-query.csv).
QUERY = ("nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv")

_UNIT = re.compile(r"\s*\[[^\]]*\]$")  # "memory.total [MiB]" -> "memory.total"
_CAPABILITY = re.compile(r"(\d+)\.(\d+)")


def where(path: str | None) -> str:
    return path or "<input>"


def cc_to_arch(cc: str | None) -> str | None:
    """``"9.0"`` -> ``"sm_90"``; anything else (``[N/A]``, blank) -> None."""
    m = _CAPABILITY.fullmatch(cc.strip()) if cc else None
    return f"sm_{m.group(1)}{m.group(2)}" if m else None


def is_query_gpu(text: str) -> bool:
    """Whether ``text`` starts as ``--query-gpu ... --format=csv`` output: a header line of query
    fields, comma-separated, ``name`` among them (units in brackets allowed)."""
    first = text.lstrip("\ufeff \t\r\n").split("\n", 1)[0]
    fields = [_UNIT.sub("", f.strip()) for f in first.split(",")]
    return "name" in fields and all(re.fullmatch(r"[a-z_][a-z0-9_.]*", f) for f in fields)


def _value(cell: str | None) -> str | None:
    """The cell's text; None for a blank cell and for nvidia-smi's ``[N/A]`` / ``[Not Supported]``."""
    if cell is None:
        return None
    got = v.text(cell.strip().removeprefix("[").removesuffix("]"))
    return None if got == NOT_APPLICABLE else got


@capture_parser(FORMAT)
def parse_query_gpu(text: str, path: str | None = None) -> HardwareFacts:
    """One device per row, in the order printed; ``path`` names the capture (the command, when read
    live) in errors and in :attr:`HardwareFacts.path`."""
    rows = [row for row in csv.reader(io.StringIO(text.strip()), skipinitialspace=True) if row]
    if not rows:
        raise CaptureError(f"{where(path)}: `{FORMAT}` printed empty output")
    header = [_UNIT.sub("", h.strip()) for h in rows[0]]
    if "name" not in header:
        raise CaptureError(f"{where(path)}: `{FORMAT}` output has no 'name' column in its header {rows[0]}")
    devices, driver = [], None
    for n, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise CaptureError(
                f"{where(path)}: `{FORMAT}` row {n + 1} has {len(row)} fields, the header {len(header)} "
                "(truncated?)"
            )
        rec = {key: _value(cell) for key, cell in zip(header, row, strict=True)}
        name = rec.get("name")
        if name is None:
            raise CaptureError(f"{where(path)}: `{FORMAT}` row {n + 1} has no name")
        driver = driver or rec.get("driver_version")
        index = rec.get("index")
        devices.append(
            DeviceFacts(
                index=int(index) if index is not None and index.isdigit() else n,
                name=name,
                uuid=rec.get("uuid"),
                pci_bus_id=rec.get("pci.bus_id"),
                arch=cc_to_arch(rec.get("compute_cap")),
                memory_total_mib=v.mib(rec.get("memory.total")),
            )
        )
    return HardwareFacts(
        source="nvidia-smi --query-gpu",
        vendor="nvidia",
        path=path,
        driver_version=driver,
        devices=tuple(devices),
    )
