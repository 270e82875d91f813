"""The NVML stand-in (issue 34): tests/nvml_stub/nvml_stub.c built against NVIDIA's nvml.h, its state
written from a real ``nvidia-smi -q -x`` capture, and envbuild run against it in a subprocess.

The real nvidia-ml-py loads ``CDLL("libnvidia-ml.so.1")`` by that bare name and caches what it looks
up for the life of the process, so each state runs in a fresh interpreter with ``LD_LIBRARY_PATH`` on
the stub's folder (setting ``os.environ`` in pytest would not reach the loader).

The state comes from the capture through :func:`state_from_capture`, this module's own small reader,
not envbuild's parser (``envbuild/hardware/nvidia_xml.py``): what NVML would answer, in NVML's units
(bytes, milliwatts, MHz, a CUDA version as 12020), so that comparing envbuild's NVML reading with its
reading of the XML is not circular.

``ENVBUILD_TEST_PYNVML=FOLDER`` runs envbuild against the ``pynvml.py`` in FOLDER (another nvidia-ml-py
release, unpacked) instead of the installed one: the states and the differential then test that
release; the tests of the installed binding's own traits (its versioned fabric call, its
NVMLLibraryMismatchError, its name in the provenance) fail there, as they should.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element

from defusedxml.ElementTree import fromstring

REPO = Path(__file__).resolve().parent.parent
SOURCE = Path(__file__).resolve().parent / "nvml_stub" / "nvml_stub.c"
LIBRARY = "libnvidia-ml.so.1"
# the test extra's package holding nvml.h (NVIDIA's CUDA 13.0 NVML headers)
HEADER_PACKAGE = "nvidia-nvml-dev==13.0.87"

# Entry points a driver's library lacks (hidden from the stub's exports by a linker version script), as
# nvidia-ml-py's releases for each driver series show: 11.515.75 (R515) has neither the clock event
# reasons' name nor a fabric call, 12.535.77 has both (the fabric call with two arguments), 12.550.52
# adds the versioned fabric call; the _v3 process calls are in 11.510.69, not in 11.495.46.
BEFORE_R535 = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetGpuFabricInfoV",
)
BEFORE_R510 = (
    *BEFORE_R535,
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
)


def nvml_header() -> Path:
    """nvml.h from the installed nvidia-nvml-dev wheel (``nvidia/cu13/include`` or ``cu12``)."""
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations or () if spec else ():
        found = sorted(Path(root).glob("*/include/nvml.h"))
        if found:
            return found[-1]
    raise FileNotFoundError(f"nvml.h not found: install the test extra ({HEADER_PACKAGE})")


def build(folder: Path, hide: Iterable[str] = ()) -> Path:
    """``folder/libnvidia-ml.so.1``, exporting every NVML function of the stub but those in ``hide``."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = ["gcc", "-Wall", "-Werror", "-Wmissing-prototypes", "-O2", "-shared", "-fPIC"]
    argv += [f"-Wl,-soname,{LIBRARY}", f"-I{nvml_header().parent}", "-o", str(folder / LIBRARY), str(SOURCE)]
    hidden = sorted(hide)
    if hidden:
        script = folder / "exports.map"
        script.write_text(f"{{ global: *; local: {'; '.join(hidden)}; }};\n", encoding="utf-8")
        argv.append(f"-Wl,--version-script={script}")
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"building the NVML stand-in failed:\n{proc.stderr}")
    return folder / LIBRARY


# ---- the test's own reader: nvidia-smi -q -x -> what NVML answers ---------------------------------


def _text(node: Element | None, path: str) -> str | None:
    """The element's text; None where it is absent or nvidia-smi printed N/A."""
    found = node.find(path) if node is not None else None
    text = (found.text or "").strip() if found is not None else None
    return None if not text or text in ("N/A", "[N/A]", "Not Supported") else text


def _int(text: str | None) -> int | None:
    """The leading number of "81920 MiB", "16x", "500.00 W" (a float for the caller to scale)."""
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)", text or "")
    return None if m is None else int(float(m.group(1)))


def _watts_to_mw(text: str | None) -> int | None:
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)\s*W", text or "")
    return None if m is None else round(float(m.group(1)) * 1000)


def _ecc_counts(scope: Element | None) -> tuple[int | None, int | None]:
    """(uncorrected, corrected) totals: DTD v10/v11 single/double-bit totals, else SRAM and DRAM summed."""
    if scope is None:
        return None, None
    if scope.find("double_bit") is not None:
        return _int(_text(scope, "double_bit/total")), _int(_text(scope, "single_bit/total"))
    unc = [_int(_text(c, ".")) for c in scope if "_uncorrectable" in c.tag]
    corr = [_int(_text(c, ".")) for c in scope if c.tag.endswith("_correctable")]
    return (
        sum(n for n in unc if n is not None) if any(n is not None for n in unc) else None,
        sum(n for n in corr if n is not None) if any(n is not None for n in corr) else None,
    )


def _gpu_state(gpu: Element) -> dict[str, str | int | None]:
    mib = 2**20
    link = gpu.find("pci/pci_gpu_link_info")
    power = gpu.find("gpu_power_readings")
    power = power if power is not None else gpu.find("power_readings")
    reasons = gpu.find("clocks_event_reasons")
    reasons = reasons if reasons is not None else gpu.find("clocks_throttle_reasons")
    errors = gpu.find("ecc_errors")
    vol = _ecc_counts(errors.find("volatile") if errors is not None else None)
    agg = _ecc_counts(errors.find("aggregate") if errors is not None else None)
    state: dict[str, str | int | None] = {
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "bus_id": _text(gpu, "pci/pci_bus_id"),
        "mem_total": (_int(_text(gpu, "fb_memory_usage/total")) or 0) * mib,
        "mem_reserved": (_int(_text(gpu, "fb_memory_usage/reserved")) or 0) * mib,
        "mem_used": (_int(_text(gpu, "fb_memory_usage/used")) or 0) * mib,
        "mem_free": (_int(_text(gpu, "fb_memory_usage/free")) or 0) * mib,
        "util_gpu": _int(_text(gpu, "utilization/gpu_util")),
        "mig_current": _text(gpu, "mig_mode/current_mig"),
        "mig_pending": _text(gpu, "mig_mode/pending_mig"),
        "ecc_current": _text(gpu, "ecc_mode/current_ecc"),
        "ecc_pending": _text(gpu, "ecc_mode/pending_ecc"),
        "ecc.volatile.uncorrected": vol[0],
        "ecc.volatile.corrected": vol[1],
        "ecc.aggregate.uncorrected": agg[0],
        "ecc.aggregate.corrected": agg[1],
        "retired_pending": _text(gpu, "retired_pages/pending_retirement"),
        "retired_sbe": _int(_text(gpu, "retired_pages/multiple_single_bit_retirement/retired_count")),
        "retired_dbe": _int(_text(gpu, "retired_pages/double_bit_retirement/retired_count")),
        "remap_corr": _int(_text(gpu, "remapped_rows/remapped_row_corr")),
        "remap_unc": _int(_text(gpu, "remapped_rows/remapped_row_unc")),
        "remap_pending": _text(gpu, "remapped_rows/remapped_row_pending"),
        "remap_failure": _text(gpu, "remapped_rows/remapped_row_failure"),
        "pcie_gen": _int(_text(link, "pcie_gen/current_link_gen")),
        "pcie_gen_max": _int(_text(link, "pcie_gen/max_link_gen")),
        "pcie_width": _int(_text(link, "link_widths/current_link_width")),
        "pcie_width_max": _int(_text(link, "link_widths/max_link_width")),
        "sm_clock": _int(_text(gpu, "clocks/sm_clock")),
        "sm_clock_max": _int(_text(gpu, "max_clocks/sm_clock")),
        "power_limit_mw": _watts_to_mw(
            _text(power, "enforced_power_limit") or _text(power, "current_power_limit")
        ),
        "power_default_mw": _watts_to_mw(_text(power, "default_power_limit")),
        "compute_mode": _text(gpu, "compute_mode"),
        "persistence": _text(gpu, "persistence_mode"),
        "fabric_state": _text(gpu, "fabric/state"),
        "fabric_status": 0 if _text(gpu, "fabric/status") == "Success" else None,
    }
    for key, path in (("pci_device_id", "pci/pci_device_id"), ("pci_subsystem_id", "pci/pci_sub_system_id")):
        packed = re.fullmatch(r"(?:0x)?([0-9A-Fa-f]{8})", _text(gpu, path) or "")
        state[key] = f"0x{packed.group(1)}" if packed else None  # "[REDACTED]": NVML would say 0
    if reasons is not None:  # nvidia-smi's element names, which the stub maps to nvml.h's bits
        active = [c.tag for c in reasons if (c.text or "").strip() == "Active"]
        state["reasons"] = ",".join(re.sub(r"^clocks_(event|throttle)_reason_", "", tag) for tag in active)
    if state["mig_current"] == "Enabled":
        state["mig_devices"] = len(gpu.findall("mig_devices/mig_device"))
    procs = gpu.findall("processes/process_info")
    if gpu.find("processes") is not None:
        for key, letter in (("compute", "C"), ("graphics", "G")):
            state[key] = ",".join(
                f"{_text(p, 'pid')}:{_int(_text(p, 'used_memory')) * mib if _text(p, 'used_memory') else '-'}"
                for p in procs
                if letter in (_text(p, "type") or "")
            )
    return state


def state_from_capture(xml: str, derived: dict[str, str | int | None] | None = None) -> dict[str, str]:
    """The stub's state for an ``nvidia-smi -q -x`` capture; ``derived`` adds or replaces keys (a
    state the capture lacks: say "derived" where it is used).  A None value drops the key: NVML then
    answers NOT_SUPPORTED."""
    root = fromstring(xml, forbid_dtd=False)
    driver = _text(root, "driver_version") or ""
    cuda = (_text(root, "cuda_version") or "0.0").split(".")
    state: dict[str, str | int | None] = {
        "driver": driver,
        "cuda": int(cuda[0]) * 1000 + int(cuda[1]) * 10,
        "nvml": f"{cuda[0]}.{driver}",  # as NVML prints its version: CUDA major, then the driver's
        "count": len(root.findall("gpu")),
    }
    for n, gpu in enumerate(root.findall("gpu")):
        state.update({f"{n}.{k}": value for k, value in _gpu_state(gpu).items()})
        for proc in gpu.findall("processes/process_info"):
            state[f"pname.{_text(proc, 'pid')}"] = _text(proc, "process_name")
    state.update(derived or {})
    return {k: str(value) for k, value in state.items() if value is not None}


# ---- envbuild against the stand-in, in a fresh interpreter ---------------------------------------

_RUN = textwrap.dedent(
    """
    import pickle, sys
    from envbuild.hardware import live
    from envbuild.validate.host import nvml_driver

    out = {"nvml": live.nvml_facts(), "nvidia": live.nvidia_facts(), "driver": nvml_driver()}
    with open(sys.argv[1], "wb") as fh:
        pickle.dump(out, fh)
    """
)


def run_envbuild(
    stub: Path, state: dict[str, str] | None, work: Path, smi: Path | None = None
) -> dict[str, Any]:
    """envbuild's readings with the stub in ``stub`` answering ``state`` (None: no state file, so NVML
    does not initialise): ``nvml`` (nvml_facts), ``nvidia`` (nvidia_facts: NVML, else nvidia-smi -q -x)
    ``driver`` (validate/host's nvml_driver) and ``calls`` (the NVML functions the library was called by,
    by their exported names).  ``smi``: a capture an ``nvidia-smi`` on PATH prints."""
    work.mkdir(parents=True, exist_ok=True)
    env = {k: val for k, val in os.environ.items() if k != "NVML_STUB_STATE"}
    env["LD_LIBRARY_PATH"] = str(stub)
    calls = work / "calls.log"
    calls.unlink(missing_ok=True)
    env["NVML_STUB_LOG"] = str(calls)
    if state is not None:
        (work / "state").write_text("".join(f"{k}={val}\n" for k, val in state.items()), encoding="utf-8")
        env["NVML_STUB_STATE"] = str(work / "state")
    tools = work / "bin"
    tools.mkdir(exist_ok=True)
    if smi is not None:
        tool = tools / "nvidia-smi"
        tool.write_text(f'#!/bin/sh\n[ "$1 $2" = "-q -x" ] && exec cat "{smi}"\nexit 9\n', encoding="utf-8")
        tool.chmod(0o755)
    env["PATH"] = f"{tools}{os.pathsep}{env.get('PATH', '')}"
    if os.environ.get("ENVBUILD_TEST_PYNVML"):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ["ENVBUILD_TEST_PYNVML"], str(REPO)) if p)
    result = work / "result.pickle"
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, str(result)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise AssertionError(f"envbuild against the NVML stand-in failed:\n{proc.stdout}{proc.stderr}")
    with result.open("rb") as fh:
        out: dict[str, Any] = pickle.load(fh)
    out["calls"] = set(calls.read_text(encoding="utf-8").split()) if calls.exists() else set()
    return out


# The stand-in libraries built: each name, and the NVML functions it hides (an older driver).
LIBRARIES = {"full": (), "before-r535": BEFORE_R535, "before-r510": BEFORE_R510}
