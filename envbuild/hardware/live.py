"""Read the hardware of this machine from the vendor's own interfaces.

NVIDIA: NVML through ``nvidia-ml-py`` (``import pynvml``) when it initialises and answers the system's
queries (the driver version, the device count, each device's handle), else ``nvidia-smi -q -x``.  Each
device's facts: :mod:`envbuild.hardware.nvml_device`.  AMD: ``amd-smi static --json``, else
``rocm-smi --json`` (the ``amdsmi`` Python library is not read: its CLI prints the same facts as JSON,
which the capture parsers already read).  Each returns None when the vendor's interface is absent; no
GPU is not an error.  The tools run through :func:`envbuild.hardware.tools.run_tool`.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from envbuild.errors import CaptureError
from envbuild.hardware.amd import parse_amd_smi, parse_rocm_smi
from envbuild.hardware.merge import merge
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.hardware.nvml_device import Nvml, binding_errors, nvml_errors, read_device
from envbuild.hardware.tools import run_tool
from envbuild.models.hardware import HardwareFacts, Provenance

__all__ = ["amd_facts", "nvidia_facts", "nvml_errors", "nvml_facts", "nvml_session"]


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
    except nvml_errors(nv):
        yield None
        return
    try:
        yield nv
    finally:
        with suppress(*nvml_errors(nv)):
            nv.nvmlShutdown()


def binding_name(nv: Any) -> str | None:
    """``nvidia-ml-py VERSION``, or the file ``pynvml`` came from where that distribution does not own it."""
    where = getattr(nv, "__file__", None)
    try:
        dist = importlib.metadata.distribution("nvidia-ml-py")
    except importlib.metadata.PackageNotFoundError:
        return f"pynvml from {where}" if where else None
    owned = Path(str(dist.locate_file("pynvml.py")))
    if where is None or owned.resolve() == Path(where).resolve():
        return f"nvidia-ml-py {dist.version}"
    return f"pynvml from {where} (not nvidia-ml-py {dist.version}'s)"


def loaded_library(maps: Path = Path("/proc/self/maps")) -> str | None:
    """The path of the libnvidia-ml.so.1 this process loaded, or None where it cannot tell."""
    try:
        lines = maps.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and Path(fields[5]).name.startswith("libnvidia-ml.so"):
            return fields[5]
    return None


def _read_nvml(nv: Any) -> HardwareFacts | None:
    r = Nvml(nv)
    driver = r.text("nvmlSystemGetDriverVersion")
    count = r.call("nvmlDeviceGetCount")
    if driver is None or count is None:
        return None
    handles = [r.call("nvmlDeviceGetHandleByIndex", n) for n in range(int(count))]
    if any(h is None for h in handles):
        return None
    cuda = r.call("nvmlSystemGetCudaDriverVersion_v2")
    if cuda is None:
        cuda = r.call("nvmlSystemGetCudaDriverVersion")
    devices = tuple(read_device(r, n, h) for n, h in enumerate(handles))
    return HardwareFacts(
        source="nvml",
        vendor="nvidia",
        driver_version=driver,
        runtime_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
        devices=devices,
        provenance=Provenance(
            nvml_version=r.text("nvmlSystemGetNVMLVersion"),
            binding=binding_name(nv),
            library=loaded_library(),
            binding_errors=tuple(r.binding_errors),
        ),
    )


def nvml_facts() -> HardwareFacts | None:
    """NVML's facts; None where NVML does not initialise or a system query fails (the driver version,
    the device count, a device's handle), so that ``nvidia-smi -q -x`` answers instead."""
    with nvml_session() as nv:
        if nv is None:
            return None
        try:
            return _read_nvml(nv)
        except binding_errors(nv):  # a mismatch outside the guarded queries: nvidia-smi answers
            return None


def _from_tool(argv: list[str], parse: Callable[[str, str | None], HardwareFacts]) -> HardwareFacts | None:
    """The tool's facts (:func:`envbuild.hardware.tools.run_tool`); None when it is absent, fails, hangs
    or prints what its parser cannot read."""
    ran = run_tool(argv)
    if ran.output is None:
        return None
    try:
        return parse(ran.output, ran.command)
    except CaptureError:
        return None


def nvidia_facts() -> HardwareFacts | None:
    """NVML when it initialises, else ``nvidia-smi -q -x``; None without an NVIDIA driver."""
    return nvml_facts() or _from_tool(["nvidia-smi", "-q", "-x"], parse_nvidia_xml)


def amd_facts() -> HardwareFacts | None:
    """``amd-smi static --json`` merged with ``amd-smi metric --json`` (ROCm 6+: the identity, maximum
    link and power cap from the first; use, memory in use, the current PCIe link and ECC counts from the
    second, so a card is judged under load), else ``rocm-smi --json``; None without either."""
    static = _from_tool(["amd-smi", "static", "--json"], parse_amd_smi)
    if static is not None:
        metric = _from_tool(["amd-smi", "metric", "--json"], parse_amd_smi)
        return static if metric is None else merge([static, metric])
    return _from_tool(
        ["rocm-smi", "--showproductname", "--showbus", "--showmeminfo", "vram", "--showuse", "--json"],
        parse_rocm_smi,
    )
