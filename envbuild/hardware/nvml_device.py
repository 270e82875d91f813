"""One NVIDIA device's facts through NVML (``pynvml``, from nvidia-ml-py), every query guarded.

Each query goes through :meth:`Nvml.call`: an ``NVMLError`` leaves the fact unreported (None), and a
text fact the driver answers ``NVML_ERROR_NOT_SUPPORTED`` for (ECC on a GeForce, MIG on a T4) reads
:data:`NOT_APPLICABLE`, as nvidia-smi prints "N/A".  A binding that does not match the library (a
wrapper missing from an older nvidia-ml-py, an argument it wants, ``NVMLLibraryMismatchError``) is
recorded in :attr:`Nvml.binding_errors` and never raised.

What is read, and how it is made to mean what ``nvidia-smi -q -x`` means by the same fact:

- memory through ``nvmlMemory_v2``, whose ``used`` leaves out the memory the driver reserves, as
  nvidia-smi's "Used" does (the v1 struct's ``used`` includes it);
- the processes of both lists, compute and graphics, with their names (nvidia-smi lists both);
- the MIG devices present counted (``nvmlDeviceGetMigDeviceHandleByIndex``), retired pages counted;
- fabric state through ``nvmlDeviceGetGpuFabricInfoV`` with envbuild's own copies of nvml.h's structs
  (v3, else v2 where the driver predates v3), else the two-argument call of R535: nvidia-ml-py's own
  structs put an 80-byte ``clusterUuid`` where nvml.h has 16 bytes (the versioned one before 12.570,
  the other before 13.615), so the state would be read from the wrong place;
- clock event reasons by their R535 name, else by the older "throttle reasons" name.
"""

from __future__ import annotations

import ctypes
from typing import Any

from envbuild.hardware import values as v
from envbuild.hardware.links import known_links
from envbuild.models.hardware import NOT_APPLICABLE, DeviceFacts, EccState, GpuProcess, PcieLink

# NVML's clock event reason bits, in nvidia-smi's order (its <clocks_event_reasons> elements), by the
# names DeviceFacts.clock_event_reasons uses
REASONS = (
    ("gpu_idle", "nvmlClocksEventReasonGpuIdle"),
    ("applications_clocks_setting", "nvmlClocksEventReasonApplicationsClocksSetting"),
    ("sw_power_cap", "nvmlClocksEventReasonSwPowerCap"),
    ("hw_slowdown", "nvmlClocksEventReasonHwSlowdown"),
    ("hw_thermal_slowdown", "nvmlClocksEventReasonHwThermalSlowdown"),
    ("hw_power_brake_slowdown", "nvmlClocksEventReasonHwPowerBrakeSlowdown"),
    ("sync_boost", "nvmlClocksEventReasonSyncBoost"),
    ("sw_thermal_slowdown", "nvmlClocksEventReasonSwThermalSlowdown"),
    ("display_clock_setting", "nvmlClocksEventReasonDisplayClockSetting"),
)
ON_OFF = {0: "Disabled", 1: "Enabled"}
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
FABRIC_STATES = {1: "Not Started", 2: "In Progress", 3: "Completed"}  # 0: not supported
_BINDING = -1  # Nvml.last_error after a binding error


class _FabricV1(ctypes.Structure):  # nvml.h nvmlGpuFabricInfo_t
    _fields_ = [
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
    ]


class _FabricV2(ctypes.Structure):  # nvml.h nvmlGpuFabricInfo_v2_t
    _fields_ = [("version", ctypes.c_uint), *_FabricV1._fields_, ("healthMask", ctypes.c_uint)]


class _FabricV3(ctypes.Structure):  # nvml.h nvmlGpuFabricInfo_v3_t (nvmlGpuFabricInfoV_t)
    _fields_ = [*_FabricV2._fields_, ("healthSummary", ctypes.c_ubyte)]


def binding_errors(nv: Any) -> tuple[type[BaseException], ...]:
    """What a binding that does not match the library raises, besides ``NVMLError``."""
    mismatch = getattr(nv, "NVMLLibraryMismatchError", None)
    extra = (mismatch,) if isinstance(mismatch, type) and issubclass(mismatch, BaseException) else ()
    return (TypeError, AttributeError, ctypes.ArgumentError, *extra)


def nvml_errors(nv: Any) -> tuple[type[BaseException], ...]:
    """Everything an NVML query may raise: ``NVMLError`` and a binding's mismatch."""
    return (nv.NVMLError, *binding_errors(nv))


class Nvml:
    """Guarded NVML queries through the binding ``nv`` (``pynvml``)."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self.binding_errors: list[str] = []
        self.last_error: int | None = None  # of the last call: NVML's code, _BINDING, None on success
        self._mismatch = binding_errors(nv)

    def call(self, name: str, *args: Any) -> Any:
        """``pynvml.<name>(*args)``, or None when NVML or the binding fails."""
        try:
            got = getattr(self.nv, name)(*args)
        except self.nv.NVMLError as exc:
            self.last_error = getattr(exc, "value", None)
            return None
        except self._mismatch as exc:
            self.last_error = _BINDING
            why = f"{name}: {type(exc).__name__}: {exc}"
            if why not in self.binding_errors:
                self.binding_errors.append(why)
            return None
        self.last_error = None
        return got

    def text(self, name: str, *args: Any) -> str | None:
        got = self.call(name, *args)
        return None if got is None else _decode(got)

    @property
    def unsupported(self) -> bool:
        """The last call answered ``NVML_ERROR_NOT_SUPPORTED``."""
        return bool(self.last_error == self.nv.NVML_ERROR_NOT_SUPPORTED)

    def named(self, names: dict[int, str], name: str, *args: Any) -> str | None:
        """An enumeration by its nvidia-smi name; N/A where not supported."""
        got = self.call(name, *args)
        if got is None:
            return NOT_APPLICABLE if self.unsupported else None
        return names.get(int(got), str(got))


def _memory(r: Nvml, h: Any) -> tuple[float | None, float | None]:
    """(total, used) MiB: used without the driver's reserve (v2), else v1's used, which includes it."""
    version = getattr(r.nv, "nvmlMemory_v2", None)
    mem = r.call("nvmlDeviceGetMemoryInfo", h, version) if version is not None else None
    if mem is None:
        mem = r.call("nvmlDeviceGetMemoryInfo", h)
    return (mem.total / 2**20, mem.used / 2**20) if mem is not None else (None, None)


def _processes(r: Nvml, h: Any) -> tuple[GpuProcess, ...] | None:
    """The compute and graphics processes (a "C+G" process is in both lists once), in pid order."""
    lists = [
        r.call(name, h)
        for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses")
    ]
    if all(found is None for found in lists):
        return None
    out: dict[int, GpuProcess] = {}
    for p in (p for found in lists for p in found or ()):
        if p.pid not in out:
            used = p.usedGpuMemory
            out[p.pid] = GpuProcess(
                pid=p.pid,
                name=r.text("nvmlSystemGetProcessName", p.pid) or "",
                used_memory_mib=used / 2**20 if used is not None else None,
            )
    return tuple(out[pid] for pid in sorted(out))


def _fabric(r: Nvml, h: Any) -> tuple[str | None, str | None]:
    """(state, status) as nvidia-smi prints them; the status only means something once completed."""
    info: Any = None
    for struct, version in ((_FabricV3, 3), (_FabricV2, 2)):
        info = struct(version=ctypes.sizeof(struct) | version << 24)
        if r.call("nvmlDeviceGetGpuFabricInfoV", h, ctypes.byref(info)) is not None:
            break
        info = None
        if r.last_error != r.nv.NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
            break
    if info is None and not r.unsupported:
        info = _FabricV1()
        if r.call("nvmlDeviceGetGpuFabricInfo", h, ctypes.byref(info)) is None:
            info = None
    if info is None:
        return (NOT_APPLICABLE, NOT_APPLICABLE) if r.unsupported else (None, None)
    state = FABRIC_STATES.get(info.state)
    if state is None:
        return NOT_APPLICABLE, NOT_APPLICABLE
    if state != "Completed":
        return state, None
    return state, r.text("nvmlErrorString", info.status) or f"NVML error {info.status}"


def _nvlink(r: Nvml, h: Any) -> tuple[bool, ...] | None:
    """One entry per link that answers; () where the card has no NVLink (NOT_SUPPORTED)."""
    states = []
    for link in range(r.nv.NVML_NVLINK_MAX_LINKS):
        got = r.call("nvmlDeviceGetNvLinkState", h, link)
        if got is None and link == 0 and not r.unsupported:
            return None
        if got is not None:
            states.append(bool(got))
    return tuple(states)


def _ecc(r: Nvml, h: Any) -> EccState:
    nv = r.nv
    mode = r.call("nvmlDeviceGetEccMode", h)
    na = NOT_APPLICABLE if mode is None and r.unsupported else None

    def count(kind: int, where: int) -> int | None:
        got = r.call("nvmlDeviceGetTotalEccErrors", h, kind, where)
        return int(got) if got is not None else None

    pending = r.call("nvmlDeviceGetRetiredPagesPendingStatus", h)
    causes = (
        nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
        nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
    )
    pages = [r.call("nvmlDeviceGetRetiredPages", h, cause) for cause in causes]
    rows = r.call("nvmlDeviceGetRemappedRows", h)  # (correctable, uncorrectable, pending, failure)
    unc, corr = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED
    return EccState(
        mode_current=ON_OFF.get(mode[0]) if mode else na,
        mode_pending=ON_OFF.get(mode[1]) if mode else na,
        volatile_uncorrectable=count(unc, nv.NVML_VOLATILE_ECC),
        aggregate_uncorrectable=count(unc, nv.NVML_AGGREGATE_ECC),
        volatile_correctable=count(corr, nv.NVML_VOLATILE_ECC),
        aggregate_correctable=count(corr, nv.NVML_AGGREGATE_ECC),
        retired_pages_pending=bool(pending) if pending is not None else None,
        retired_pages=sum(len(p) for p in pages) if all(p is not None for p in pages) else None,
        remapped_rows_correctable=rows[0] if rows else None,
        remapped_rows_uncorrectable=rows[1] if rows else None,
        remap_pending=bool(rows[2]) if rows else None,
        remap_failure=bool(rows[3]) if rows else None,
    )


def _mig_devices(r: Nvml, h: Any) -> int | None:
    most = r.call("nvmlDeviceGetMaxMigDeviceCount", h)
    if most is None:
        return None
    return sum(r.call("nvmlDeviceGetMigDeviceHandleByIndex", h, i) is not None for i in range(int(most)))


def _decode(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _number(r: Nvml, name: str, *args: Any, scale: float = 1.0) -> float | None:
    got = r.call(name, *args)
    return got / scale if isinstance(got, (int, float)) else None


def read_device(r: Nvml, index: int, h: Any) -> DeviceFacts:
    """Device ``index`` (handle ``h``), every fact NVML gives that DeviceFacts holds."""
    nv = r.nv
    pci = r.call("nvmlDeviceGetPciInfo", h)
    total, used = _memory(r, h)
    util = r.call("nvmlDeviceGetUtilizationRates", h)
    mig = r.call("nvmlDeviceGetMigMode", h)
    mig_mode = ON_OFF.get(mig[0]) if mig else NOT_APPLICABLE if r.unsupported else None
    reasons = r.call("nvmlDeviceGetCurrentClocksEventReasons", h)
    if reasons is None and not r.unsupported:  # a driver before R535: the older name
        reasons = r.call("nvmlDeviceGetCurrentClocksThrottleReasons", h)
    fabric_state, fabric_status = _fabric(r, h)
    dev = DeviceFacts(
        index=index,
        name=r.text("nvmlDeviceGetName", h) or "",
        uuid=r.text("nvmlDeviceGetUUID", h),
        pci_bus_id=_decode(pci.busId) if pci else None,
        pci_device_id=v.pci_id(f"{pci.pciDeviceId:08x}") if pci else None,
        pci_subsystem_id=v.pci_id(f"{pci.pciSubSystemId:08x}") if pci else None,
        memory_total_mib=total,
        memory_used_mib=used,
        utilization_gpu_pct=float(util.gpu) if util else None,
        mig_mode=mig_mode,
        mig_devices=_mig_devices(r, h) if mig_mode == "Enabled" else 0 if mig_mode else None,
        ecc=_ecc(r, h),
        pcie=PcieLink(
            gen_current=r.call("nvmlDeviceGetCurrPcieLinkGeneration", h),
            gen_max=r.call("nvmlDeviceGetMaxPcieLinkGeneration", h),
            width_current=r.call("nvmlDeviceGetCurrPcieLinkWidth", h),
            width_max=r.call("nvmlDeviceGetMaxPcieLinkWidth", h),
        ),
        clock_event_reasons=None
        if reasons is None
        else tuple(name for name, bit in REASONS if reasons & getattr(nv, bit, 0)),
        sm_clock_mhz=_number(r, "nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_SM),
        sm_clock_max_mhz=_number(r, "nvmlDeviceGetMaxClockInfo", h, nv.NVML_CLOCK_SM),
        power_limit_w=_number(r, "nvmlDeviceGetEnforcedPowerLimit", h, scale=1000),
        default_power_limit_w=_number(r, "nvmlDeviceGetPowerManagementDefaultLimit", h, scale=1000),
        compute_mode=r.named(COMPUTE_MODES, "nvmlDeviceGetComputeMode", h),
        persistence_mode=r.named(ON_OFF, "nvmlDeviceGetPersistenceMode", h),
        processes=_processes(r, h),
        nvlink_up=_nvlink(r, h),
        fabric_state=fabric_state,
        fabric_status=fabric_status,
    )
    return known_links(dev)
