"""The plain ``nvidia-smi`` screen that marketplaces show.

It carries fewer facts than ``nvidia-smi -q -x``: the driver and CUDA version; per GPU the name,
persistence mode, bus id, volatile uncorrectable ECC count, power draw and cap, memory used and total,
utilization, compute mode and (driver 450 and later) the MIG mode; the MIG devices table; and the
processes table.  Everything else (PCI ids, PCIe link, clock reasons, default power limit, fabric,
remapped rows) is ``None``: not reported, so the rules that need it say they went unjudged.
Both layouts are read: before driver 530 (``| GPU  Name        Persistence-M|``) and after.
"""

from __future__ import annotations

import re

from envbuild.errors import CaptureError
from envbuild.hardware import values as v
from envbuild.hardware.links import known_links
from envbuild.hardware.parse_guard import capture_parser
from envbuild.models.hardware import DeviceFacts, EccState, GpuProcess, HardwareFacts

FORMAT = "nvidia-smi"
HEADER = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)\s+CUDA Version:\s+(\S+)")
_ROW1 = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>.*?)\s+(?P<persistence>On|Off|N/A|WDDM|TCC)\s*\|"
    r"\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s+(?:On|Off|N/A)\s*\|"
    r"\s*(?P<ecc>\S+)\s*\|$"
)
_ROW2 = re.compile(
    r"^\|\s*\S+\s+\S+\s+(?:P\d+|N/A)\s+(?P<power>.*?)\s*\|"
    r"\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|"
    r"\s*(?P<util>\d+%|N/A)\s+(?P<mode>Default|E\. Process|E\. Thread|Prohibited|N/A)\s*\|$"
)
_ROW3 = re.compile(r"^\|\s*\|\s*\|\s*(?P<mig>Enabled|Disabled|N/A)\s*\|$")
_MIG_ROW = re.compile(r"^\|\s+(?P<gpu>\d+)\s+\d+\s+\d+\s+\d+\s+\|\s+\d+MiB\s*/\s*\d+MiB")
_PROCESS = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+(?:\S+\s+\S+\s+)?(?P<pid>\d+)\s+(?:C\+G|M\+C|C|G|M)\s+"
    r"(?P<name>.*?)\s+(?P<mem>\d+MiB|N/A)\s*\|$"
)
_COMPUTE_MODES = {"E. Process": "Exclusive_Process", "E. Thread": "Exclusive_Thread"}
_PERSISTENCE = {"On": "Enabled", "Off": "Disabled", "N/A": "N/A"}


def is_table(text: str) -> bool:
    return HEADER.search(text) is not None


def _devices(lines: list[str]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for line in lines:
        line = line.rstrip()
        if m := _ROW1.match(line):
            rows.append(m.groupdict())
            continue
        # the second row (power, memory, use, compute mode), then the third (MIG mode, driver 450+)
        pattern = _ROW2 if rows and "mode" not in rows[-1] else _ROW3
        if rows and "mig" not in rows[-1] and (m := pattern.match(line)):
            rows[-1].update(m.groupdict())
    return rows


def _section(lines: list[str], title: str) -> list[str] | None:
    start = next((n for n, line in enumerate(lines) if re.match(rf"^\|\s*{title}:", line)), None)
    if start is None:
        return None
    out = []
    for line in lines[start + 1 :]:
        if not line.strip():  # a section ends at the blank line before the next table
            break
        if line.startswith("|"):
            out.append(line.rstrip())
    return out


def _processes(lines: list[str]) -> dict[int, list[GpuProcess]] | None:
    section = _section(lines, "Processes")
    if section is None:
        return None
    found: dict[int, list[GpuProcess]] = {}
    for line in section:
        if m := _PROCESS.match(line):
            found.setdefault(int(m["gpu"]), []).append(
                GpuProcess(pid=int(m["pid"]), name=m["name"], used_memory_mib=v.mib(m["mem"]))
            )
    return found


def _power_cap(cell: str | None) -> float | None:
    m = re.search(r"/\s*(\S+)\s*$", cell or "")
    return v.number(m.group(1).removesuffix("W")) if m else None


@capture_parser(FORMAT)
def parse_nvidia_table(text: str, path: str | None = None) -> HardwareFacts:
    name = path or "<input>"
    header = HEADER.search(text)
    if header is None:
        raise CaptureError(f"{name}: not an `{FORMAT}` screen: no 'NVIDIA-SMI ... Driver Version:' line")
    lines = text.splitlines()
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    rows = _devices(lines)
    if not rows or not re.fullmatch(r"\+[-+=]+\+", last):
        raise CaptureError(
            f"{name}: truncated `{FORMAT}` screen: it does not end with the table's last border"
        )
    processes = _processes(lines)
    mig_section = _section(lines, "MIG devices")
    mig_counts: dict[int, int] = {}
    for line in mig_section or ():
        if m := _MIG_ROW.match(line):
            mig_counts[int(m["gpu"])] = mig_counts.get(int(m["gpu"]), 0) + 1
    devices = []
    for row in rows:
        index = int(row["index"])
        mig = v.text(row.get("mig"))
        devices.append(
            DeviceFacts(
                index=index,
                name=row["name"],
                pci_bus_id=row["bus"],
                memory_total_mib=v.mib(row.get("total")),
                memory_used_mib=v.mib(row.get("used")),
                utilization_gpu_pct=v.number(row.get("util")),
                mig_mode=mig,
                mig_devices=mig_counts.get(index, 0) if mig == "Enabled" else (0 if mig else None),
                ecc=EccState(volatile_uncorrectable=v.integer(row["ecc"])),
                power_limit_w=_power_cap(row.get("power")),
                compute_mode=_COMPUTE_MODES.get(row.get("mode", ""), v.text(row.get("mode"))),
                persistence_mode=_PERSISTENCE.get(row["persistence"]),
                processes=tuple(processes.get(index, ())) if processes is not None else None,
            )
        )
    cuda = header.group(3)
    return HardwareFacts(
        source="nvidia-smi table",
        vendor="nvidia",
        path=path,
        driver_version=header.group(2),
        runtime_version=cuda if re.fullmatch(r"\d+(\.\d+)*", cuda) else None,
        devices=tuple(known_links(d) for d in devices),
    )
