"""The hardware under an environment, as the vendor's own interfaces report it (issue 26).

One :class:`HardwareFacts` per source: a live reading (NVML through nvidia-ml-py, ``nvidia-smi -q -x``,
amdsmi / ``amd-smi`` / ``rocm-smi --json``) or a capture file given to ``check --smi``.  The same rules
(:mod:`envbuild.hardware.rules`) judge both.

``None`` everywhere means *this source does not report it*: a rule that needs the fact says it went
unjudged instead of passing.  A card that reports "N/A" for a feature it lacks (fabric state on a
PCIe card, MIG on a GeForce) is recorded as :data:`NOT_APPLICABLE`, which no rule alarms on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

NOT_APPLICABLE = "N/A"

HardwareVendor = Literal["nvidia", "amd"]
# Where the facts came from.  "nvidia-smi table" is the plain `nvidia-smi` screen marketplaces show;
# "nvidia-smi --query-gpu" its CSV query (the identity and the compute capability, read by the validator).
FactSource = Literal[
    "nvml", "nvidia-smi -q -x", "nvidia-smi table", "nvidia-smi --query-gpu", "amdsmi", "amd-smi", "rocm-smi"
]


@dataclass(frozen=True, kw_only=True)
class PcieLink:
    gen_current: int | None = None
    gen_max: int | None = None  # the most the card and slot allow together (nvidia-smi "Max")
    width_current: int | None = None  # lanes: 16 for x16
    width_max: int | None = None


@dataclass(frozen=True, kw_only=True)
class EccState:
    mode_current: str | None = None  # "Enabled" / "Disabled" / NOT_APPLICABLE
    mode_pending: str | None = None
    volatile_uncorrectable: int | None = None  # since the driver loaded
    aggregate_uncorrectable: int | None = None  # over the card's life
    volatile_correctable: int | None = None
    aggregate_correctable: int | None = None
    retired_pages_pending: bool | None = None  # page retirement (pre-Ampere)
    retired_pages: int | None = None
    remapped_rows_uncorrectable: int | None = None  # row remapping (Ampere and later)
    remapped_rows_correctable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None


@dataclass(frozen=True, kw_only=True)
class GpuProcess:
    pid: int | None = None
    name: str = ""
    used_memory_mib: float | None = None


@dataclass(frozen=True, kw_only=True)
class DeviceFacts:
    index: int
    name: str  # the product name as the tool prints it: "NVIDIA H100 80GB HBM3"
    uuid: str | None = None
    pci_bus_id: str | None = None  # "00000000:18:00.0"
    pci_device_id: str | None = None  # "10de:2330" (vendor:device, lower-case hex)
    pci_subsystem_id: str | None = None  # "10de:16c1"
    arch: str | None = None  # "sm_90" / "gfx942" when the tool reports it
    memory_total_mib: float | None = None
    memory_used_mib: float | None = None
    utilization_gpu_pct: float | None = None  # to tell idle from loaded
    mig_mode: str | None = None  # "Enabled" / "Disabled" / NOT_APPLICABLE
    mig_devices: int | None = None  # MIG instances present
    compute_partition: str | None = None  # AMD: "SPX", "DPX", "QPX", "CPX"
    memory_partition: str | None = None  # AMD: "NPS1", "NPS4"
    ecc: EccState = field(default_factory=EccState)
    pcie: PcieLink = field(default_factory=PcieLink)
    # Active clock event (throttle) reasons, by NVML's names without the prefix:
    # "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
    # "hw_power_brake_slowdown", "sw_thermal_slowdown", "sync_boost", "display_clock_setting".
    clock_event_reasons: tuple[str, ...] | None = None
    sm_clock_mhz: float | None = None  # the SM clock now; under load, against its maximum
    sm_clock_max_mhz: float | None = None
    power_limit_w: float | None = None  # enforced
    default_power_limit_w: float | None = None
    compute_mode: str | None = None  # "Default", "Exclusive_Process", "Prohibited"
    persistence_mode: str | None = None  # "Enabled" / "Disabled"
    processes: tuple[GpuProcess, ...] | None = None
    nvlink_up: tuple[bool, ...] | None = None  # one entry per link the card has; () = no links
    fabric_state: str | None = None  # "Completed", "In Progress", "Not Started", NOT_APPLICABLE
    fabric_status: str | None = None  # "Success" or the error NVML reports


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Which library answered a live NVML reading, through which binding: a stand-in's facts (its NVML
    version begins "stand-in") cannot pass for a real driver's."""

    nvml_version: str | None = None  # nvmlSystemGetNVMLVersion: "12.535.54.03"
    binding: str | None = None  # "nvidia-ml-py 13.615.71", or the pynvml file where no distribution owns it
    library: str | None = None  # the libnvidia-ml.so.1 the process loaded (its path)
    binding_errors: tuple[str, ...] = ()  # NVML calls the binding could not make (a version mismatch)


@dataclass(frozen=True, kw_only=True)
class HardwareFacts:
    source: FactSource
    vendor: HardwareVendor
    path: str | None = None  # the capture file, for check --smi
    driver_version: str | None = None
    runtime_version: str | None = None  # CUDA version the driver supports / ROCm version
    devices: tuple[DeviceFacts, ...] = ()
    in_container: bool | None = None  # processes of other containers are invisible there
    provenance: Provenance | None = None  # a live NVML reading's library and binding
