"""Read the hardware of this machine from the vendor's own interfaces.

NVIDIA: NVML through ``nvidia-ml-py`` (``import pynvml``) when it initialises, else ``nvidia-smi -q -x``.
AMD: ``amd-smi static --json``, else ``rocm-smi --json`` (the ``amdsmi`` Python library is not read:
its CLI prints the same facts as JSON, which the capture parsers already read).  Each returns None
when the vendor's interface is absent; no GPU is not an error.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from envbuild.errors import CaptureError
from envbuild.hardware.amd import parse_amd_smi, parse_rocm_smi
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.models.hardware import (
    NOT_APPLICABLE,
    DeviceFacts,
    EccState,
    GpuProcess,
    HardwareFacts,
    PcieLink,
)

TOOL_TIMEOUT_S = 30.0
T = TypeVar("T")
# NVML's clock event reason bits, by the names DeviceFacts.clock_event_reasons uses
_REASONS = (
    ("gpu_idle", "nvmlClocksEventReasonGpuIdle"),
    ("applications_clocks_setting", "nvmlClocksEventReasonApplicationsClocksSetting"),
    ("sw_power_cap", "nvmlClocksEventReasonSwPowerCap"),
    ("hw_slowdown", "nvmlClocksEventReasonHwSlowdown"),
    ("sync_boost", "nvmlClocksEventReasonSyncBoost"),
    ("sw_thermal_slowdown", "nvmlClocksEventReasonSwThermalSlowdown"),
    ("hw_thermal_slowdown", "nvmlClocksEventReasonHwThermalSlowdown"),
    ("hw_power_brake_slowdown", "nvmlClocksEventReasonHwPowerBrakeSlowdown"),
    ("display_clock_setting", "nvmlClocksEventReasonDisplayClockSetting"),
)


def run_tool(argv: list[str]) -> str | None:
    """The tool's standard output, or None when it is absent, fails or hangs."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _nvml_device(nv: Any, index: int) -> DeviceFacts:
    h = nv.nvmlDeviceGetHandleByIndex(index)

    def get(call: Callable[..., T], *args: Any) -> T | None:
        try:
            return call(h, *args)
        except nv.NVMLError:
            return None

    def text(value: Any) -> str | None:
        return value.decode() if isinstance(value, bytes) else value

    pci, mem = get(nv.nvmlDeviceGetPciInfo), get(nv.nvmlDeviceGetMemoryInfo)
    util, mig = get(nv.nvmlDeviceGetUtilizationRates), get(nv.nvmlDeviceGetMigMode)
    ecc_mode = get(nv.nvmlDeviceGetEccMode)
    rows = get(nv.nvmlDeviceGetRemappedRows)  # (correctable, uncorrectable, pending, failure)
    reasons = get(nv.nvmlDeviceGetCurrentClocksEventReasons)
    limit, default = get(nv.nvmlDeviceGetEnforcedPowerLimit), get(nv.nvmlDeviceGetPowerManagementDefaultLimit)
    procs = get(nv.nvmlDeviceGetComputeRunningProcesses)
    fabric = get(nv.nvmlDeviceGetGpuFabricInfo)
    links = [get(nv.nvmlDeviceGetNvLinkState, link) for link in range(nv.NVML_NVLINK_MAX_LINKS)]
    modes = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
    on_off = {0: "Disabled", 1: "Enabled"}

    def counts(kind: int, where: int) -> int | None:
        got = get(nv.nvmlDeviceGetTotalEccErrors, kind, where)
        return int(got) if got is not None else None

    unc, corr = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED
    return DeviceFacts(
        index=index,
        name=text(get(nv.nvmlDeviceGetName)) or "",
        uuid=text(get(nv.nvmlDeviceGetUUID)),
        pci_bus_id=text(pci.busId) if pci else None,
        pci_device_id=f"{pci.pciDeviceId & 0xFFFF:04x}:{pci.pciDeviceId >> 16:04x}" if pci else None,
        pci_subsystem_id=f"{pci.pciSubSystemId & 0xFFFF:04x}:{pci.pciSubSystemId >> 16:04x}" if pci else None,
        memory_total_mib=mem.total / 2**20 if mem else None,
        memory_used_mib=mem.used / 2**20 if mem else None,
        utilization_gpu_pct=float(util.gpu) if util else None,
        mig_mode=on_off.get(mig[0]) if mig else NOT_APPLICABLE,
        ecc=EccState(
            mode_current=on_off.get(ecc_mode[0]) if ecc_mode else NOT_APPLICABLE,
            mode_pending=on_off.get(ecc_mode[1]) if ecc_mode else NOT_APPLICABLE,
            volatile_uncorrectable=counts(unc, nv.NVML_VOLATILE_ECC),
            aggregate_uncorrectable=counts(unc, nv.NVML_AGGREGATE_ECC),
            volatile_correctable=counts(corr, nv.NVML_VOLATILE_ECC),
            aggregate_correctable=counts(corr, nv.NVML_AGGREGATE_ECC),
            retired_pages_pending=bool(pending)
            if (pending := get(nv.nvmlDeviceGetRetiredPagesPendingStatus)) is not None
            else None,
            remapped_rows_correctable=rows[0] if rows else None,
            remapped_rows_uncorrectable=rows[1] if rows else None,
            remap_pending=bool(rows[2]) if rows else None,
            remap_failure=bool(rows[3]) if rows else None,
        ),
        pcie=PcieLink(
            gen_current=get(nv.nvmlDeviceGetCurrPcieLinkGeneration),
            gen_max=get(nv.nvmlDeviceGetMaxPcieLinkGeneration),
            width_current=get(nv.nvmlDeviceGetCurrPcieLinkWidth),
            width_max=get(nv.nvmlDeviceGetMaxPcieLinkWidth),
        ),
        clock_event_reasons=None
        if reasons is None
        else tuple(name for name, bit in _REASONS if reasons & getattr(nv, bit)),
        power_limit_w=limit / 1000 if limit is not None else None,
        default_power_limit_w=default / 1000 if default is not None else None,
        compute_mode=modes.get(mode) if (mode := get(nv.nvmlDeviceGetComputeMode)) is not None else None,
        persistence_mode=on_off.get(pm) if (pm := get(nv.nvmlDeviceGetPersistenceMode)) is not None else None,
        processes=None
        if procs is None
        else tuple(
            GpuProcess(pid=p.pid, used_memory_mib=p.usedGpuMemory / 2**20 if p.usedGpuMemory else None)
            for p in procs
        ),
        nvlink_up=tuple(bool(s) for s in links if s is not None),
        fabric_state=_fabric_state(nv, fabric),
        fabric_status=None
        if fabric is None
        else ("Success" if fabric.status == 0 else f"NVML error {fabric.status}"),
    )


def _fabric_state(nv: Any, fabric: Any) -> str | None:
    if fabric is None:
        return NOT_APPLICABLE
    names = {
        nv.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED: NOT_APPLICABLE,
        nv.NVML_GPU_FABRIC_STATE_NOT_STARTED: "Not Started",
        nv.NVML_GPU_FABRIC_STATE_IN_PROGRESS: "In Progress",
        nv.NVML_GPU_FABRIC_STATE_COMPLETED: "Completed",
    }
    return names.get(fabric.state, str(fabric.state))


@contextmanager
def nvml_session() -> Iterator[Any]:
    """``pynvml``, initialised for the block and shut down after; None where NVML does not initialise
    (no driver, no GPU, or libnvidia-ml.so.1 not mounted)."""
    try:
        import pynvml as nv
    except ImportError:
        yield None
        return
    try:
        nv.nvmlInit()
    except nv.NVMLError:
        yield None
        return
    try:
        yield nv
    finally:
        nv.nvmlShutdown()


def nvml_facts() -> HardwareFacts | None:
    with nvml_session() as nv:
        if nv is None:
            return None
        driver = nv.nvmlSystemGetDriverVersion()
        cuda = nv.nvmlSystemGetCudaDriverVersion_v2()
        devices = tuple(_nvml_device(nv, n) for n in range(nv.nvmlDeviceGetCount()))
    return HardwareFacts(
        source="nvml",
        vendor="nvidia",
        driver_version=driver.decode() if isinstance(driver, bytes) else driver,
        runtime_version=f"{cuda // 1000}.{cuda % 1000 // 10}",
        devices=devices,
    )


def _from_tool(argv: list[str], parse: Callable[[str, str | None], HardwareFacts]) -> HardwareFacts | None:
    out = run_tool(argv)
    if out is None:
        return None
    try:
        return parse(out, " ".join(argv))
    except CaptureError:
        return None


def nvidia_facts() -> HardwareFacts | None:
    """NVML when it initialises, else ``nvidia-smi -q -x``; None without an NVIDIA driver."""
    return nvml_facts() or _from_tool(["nvidia-smi", "-q", "-x"], parse_nvidia_xml)


def amd_facts() -> HardwareFacts | None:
    """``amd-smi static --json`` (ROCm 6+), else ``rocm-smi --json``; None without either."""
    return _from_tool(["amd-smi", "static", "--json"], parse_amd_smi) or _from_tool(
        ["rocm-smi", "--showproductname", "--showbus", "--showmeminfo", "vram", "--showuse", "--json"],
        parse_rocm_smi,
    )
