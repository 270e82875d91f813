"""``nvidia-smi -q -x``: every fact :class:`DeviceFacts` holds that the XML carries.

Parsed with defusedxml.  A real capture begins with ``<!DOCTYPE nvidia_smi_log SYSTEM
"nvsmi_device_vNN.dtd">``, which is accepted (the DTD is never fetched); an entity declaration is
refused, never expanded.  Element names follow NVIDIA's DTDs v10 to v13: older drivers print
``clocks_throttle_reasons``, ``power_readings`` and single/double-bit ECC counts, newer ones
``clocks_event_reasons``, ``gpu_power_readings`` and SRAM/DRAM counts.
"""

from __future__ import annotations

import re
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from envbuild.errors import CaptureError
from envbuild.hardware import values as v
from envbuild.hardware.links import known_links
from envbuild.hardware.parse_guard import capture_parser
from envbuild.models.hardware import DeviceFacts, EccState, GpuProcess, HardwareFacts, PcieLink

FORMAT = "nvidia-smi -q -x"
_REASON_PREFIX = re.compile(r"^clocks?_(?:event|throttle)_reasons?_")
# nvidia-smi's element names that differ from NVML's reason names (DeviceFacts.clock_event_reasons)
_REASON_NAMES = {"display_clocks_setting": "display_clock_setting"}


def where(path: str | None) -> str:
    return path or "<input>"


def parse_root(text: str, path: str | None = None) -> Element:
    """The ``<nvidia_smi_log>`` element, or a :class:`CaptureError` naming the file and what is wrong."""
    name = where(path)
    if not text.strip():
        raise CaptureError(f"{name}: empty capture: `{FORMAT}` prints an <nvidia_smi_log> document")
    try:
        root: Element = fromstring(text, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise CaptureError(
            f"{name}: refused: the XML declares entities or external references ({type(exc).__name__}); "
            f"a real `{FORMAT}` capture has none"
        ) from None
    except ParseError as exc:
        why = "truncated" if "no element found" in str(exc) or "unclosed token" in str(exc) else "not XML"
        raise CaptureError(f"{name}: {why} `{FORMAT}` capture ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise CaptureError(f"{name}: root element is <{root.tag}>, expected <nvidia_smi_log> (`{FORMAT}`)")
    return root


def _find(node: Element | None, *paths: str) -> str | None:
    """The text of the first of ``paths`` present under ``node`` (``""`` for an empty element)."""
    if node is None:
        return None
    for path in paths:
        found = node.find(path)
        if found is not None:
            return (found.text or "").strip()
    return None


def _sum_counts(node: Element | None, keep: str) -> int | None:
    """Sum the ECC counters under ``node`` whose names match ``keep``; None when none is a number."""
    if node is None:
        return None
    counts = [v.integer(child.text) for child in node.iter() if re.fullmatch(keep, child.tag)]
    numbers = [c for c in counts if c is not None]
    return sum(numbers) if numbers else None


def _ecc_counts(errors: Element | None, scope: str) -> tuple[int | None, int | None]:
    """(uncorrectable, correctable) for ``volatile`` or ``aggregate``, in either of nvidia-smi's layouts."""
    node = errors.find(scope) if errors is not None else None
    if node is None:
        return None, None
    if node.find("double_bit") is not None:  # DTD v10/v11: single/double-bit per memory, plus a total
        return (v.integer(_find(node, "double_bit/total")), v.integer(_find(node, "single_bit/total")))
    # DTD v12+: sram_/dram_ counts; v13 splits SRAM uncorrectable into parity and SEC-DED
    uncorrectable = _sum_counts(node, r"(sram|dram)_uncorrectable(_parity|_secded)?")
    return uncorrectable, _sum_counts(node, r"(sram|dram)_correctable")


def _ecc(gpu: Element) -> EccState:
    errors = gpu.find("ecc_errors")
    vol_unc, vol_corr = _ecc_counts(errors, "volatile")
    agg_unc, agg_corr = _ecc_counts(errors, "aggregate")
    retired = gpu.find("retired_pages")
    retired_count = None
    if retired is not None:
        counts = [
            v.integer(_find(retired, f"{kind}/retired_count"))
            for kind in ("multiple_single_bit_retirement", "double_bit_retirement")
        ]
        known = [c for c in counts if c is not None]
        retired_count = sum(known) if known else None
    remap = gpu.find("remapped_rows")
    return EccState(
        mode_current=v.text(_find(gpu, "ecc_mode/current_ecc")),
        mode_pending=v.text(_find(gpu, "ecc_mode/pending_ecc")),
        volatile_uncorrectable=vol_unc,
        aggregate_uncorrectable=agg_unc,
        volatile_correctable=vol_corr,
        aggregate_correctable=agg_corr,
        retired_pages_pending=v.yes_no(_find(gpu, "retired_pages/pending_retirement")),
        retired_pages=retired_count,
        remapped_rows_uncorrectable=v.integer(_find(remap, "remapped_row_unc")),
        remapped_rows_correctable=v.integer(_find(remap, "remapped_row_corr")),
        remap_pending=v.yes_no(_find(remap, "remapped_row_pending")),
        remap_failure=v.yes_no(_find(remap, "remapped_row_failure")),
    )


def _pcie(gpu: Element) -> PcieLink:
    link = gpu.find("pci/pci_gpu_link_info")
    if link is None:
        return PcieLink()
    return PcieLink(
        gen_current=v.integer(_find(link, "pcie_gen/current_link_gen")),
        gen_max=v.integer(_find(link, "pcie_gen/max_link_gen")),
        width_current=v.width(_find(link, "link_widths/current_link_width")),
        width_max=v.width(_find(link, "link_widths/max_link_width")),
    )


def _clock_reasons(gpu: Element) -> tuple[str, ...] | None:
    node = gpu.find("clocks_event_reasons")
    if node is None:
        node = gpu.find("clocks_throttle_reasons")
    if node is None:
        return None
    active = []
    for child in node:
        if (child.text or "").strip() == "Active":
            name = _REASON_PREFIX.sub("", child.tag)
            active.append(_REASON_NAMES.get(name, name))
    return tuple(active)


def _processes(gpu: Element) -> tuple[GpuProcess, ...] | None:
    node = gpu.find("processes")
    if node is None:
        return None
    return tuple(
        GpuProcess(
            pid=v.integer(_find(proc, "pid")),
            name=_find(proc, "process_name") or "",
            used_memory_mib=v.mib(_find(proc, "used_memory")),
        )
        for proc in node.findall("process_info")
    )


def _arch(gpu: Element) -> str | None:
    cc = _find(gpu, "compute_cap")
    if not cc or not re.fullmatch(r"\d+\.\d+", cc):
        return None
    major, minor = cc.split(".")
    return f"sm_{major}{minor}"


def _power(gpu: Element) -> tuple[float | None, float | None]:
    """(enforced, default) limits: ``gpu_power_readings`` (DTD v12+) or ``power_readings`` (older)."""
    node = gpu.find("gpu_power_readings")
    if node is None:
        node = gpu.find("power_readings")
    if node is None:
        return None, None
    enforced = _find(node, "enforced_power_limit", "current_power_limit", "power_limit")
    return v.number(enforced), v.number(_find(node, "default_power_limit"))


def _device(index: int, gpu: Element) -> DeviceFacts:
    mig_devices = gpu.find("mig_devices")
    enforced, default = _power(gpu)
    return DeviceFacts(
        index=index,
        name=_find(gpu, "product_name") or "",
        uuid=v.text(_find(gpu, "uuid")),
        pci_bus_id=_find(gpu, "pci/pci_bus_id") or gpu.get("id"),
        pci_device_id=v.pci_id(_find(gpu, "pci/pci_device_id")),
        pci_subsystem_id=v.pci_id(_find(gpu, "pci/pci_sub_system_id")),
        arch=_arch(gpu),
        memory_total_mib=v.mib(_find(gpu, "fb_memory_usage/total")),
        memory_used_mib=v.mib(_find(gpu, "fb_memory_usage/used")),
        utilization_gpu_pct=v.number(_find(gpu, "utilization/gpu_util")),
        mig_mode=v.text(_find(gpu, "mig_mode/current_mig")),
        mig_devices=len(mig_devices.findall("mig_device")) if mig_devices is not None else None,
        ecc=_ecc(gpu),
        pcie=_pcie(gpu),
        clock_event_reasons=_clock_reasons(gpu),
        sm_clock_mhz=v.number(_find(gpu, "clocks/sm_clock")),
        sm_clock_max_mhz=v.number(_find(gpu, "max_clocks/sm_clock")),
        power_limit_w=enforced,
        default_power_limit_w=default,
        compute_mode=v.text(_find(gpu, "compute_mode")),
        persistence_mode=v.text(_find(gpu, "persistence_mode")),
        processes=_processes(gpu),
        fabric_state=v.text(_find(gpu, "fabric/state")),
        fabric_status=v.text(_find(gpu, "fabric/status")),
    )


@capture_parser(FORMAT)
def parse_nvidia_xml(text: str, path: str | None = None) -> HardwareFacts:
    """Facts of every ``<gpu>`` in document order (nvidia-smi's index order)."""
    root = parse_root(text, path)
    gpus = root.findall("gpu")
    attached = v.integer(_find(root, "attached_gpus"))
    if not gpus and attached != 0:
        raise CaptureError(f"{where(path)}: `{FORMAT}` capture lists no <gpu> (truncated?)")
    cuda = v.text(_find(root, "cuda_version"))
    return HardwareFacts(
        source="nvidia-smi -q -x",
        vendor="nvidia",
        path=path,
        driver_version=v.text(_find(root, "driver_version")),
        runtime_version=cuda if cuda and re.fullmatch(r"\d+(\.\d+)*", cuda) else None,
        devices=tuple(
            known_links(_device(n, gpu), _find(gpu, "product_brand")) for n, gpu in enumerate(gpus)
        ),
    )
