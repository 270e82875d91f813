"""scripts/gpu-check.sh's hardware capture: NVML's raw answers beside the facts envbuild parsed from them.

    python tests/gpu/hardware_capture.py SYS_PATH LOCK SMI_XML HARDWARE_JSON

SYS_PATH: folders put first on sys.path (the carried wheels, the repo), ``:``-separated.  envbuild reads
the hardware as the validator does (``envbuild.hardware.live.nvml_facts``) through a recording stand-in
for the ``pynvml`` module: every ``nvml*`` function envbuild calls goes to the real binding (and so to the
real library, or to the dry run's NVML stand-in), and the call, its arguments and what it returned or
raised are kept.  Printed per device: the raw values, then the parsed DeviceFacts; then the provenance,
how the facts differ from ``nvidia-smi -q -x`` (SMI_XML, when there is one), and the hardware rules'
verdicts on each against LOCK.  HARDWARE_JSON gets the facts, the verdicts and the raw calls, for a
fixture (tests/fixtures/smi/real/).
"""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [p for p in sys.argv[1].split(":") if p] if len(sys.argv) > 1 else []

from envbuild.boundary import to_data  # noqa: E402
from envbuild.errors import CaptureError  # noqa: E402
from envbuild.hardware.live import nvml_facts  # noqa: E402
from envbuild.hardware.nvidia_xml import parse_nvidia_xml  # noqa: E402
from envbuild.models.hardware import HardwareFacts  # noqa: E402
from envbuild.models.lock import read_lock  # noqa: E402
from envbuild.validate.hardware_stage import judge_live, own_pids  # noqa: E402

SYSTEM = "system"


class RecordingNvml:
    """``pynvml`` as envbuild sees it, each ``nvml*`` function call recorded as text when it returns or
    raises (out-parameters read after the call); everything else is the real module's."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._calls: list[dict[str, Any]] = []
        self._labels: dict[int, str] = {}  # a device handle's address -> "gpu0", "gpu0.mig1"

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._real, name)
        if name.startswith("nvml") and callable(value) and not isinstance(value, type):
            return self._recorder(name, value)
        return value

    def _recorder(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            try:
                got = fn(*args)
            except BaseException as exc:
                self._record(name, args, raised=exc)
                raise
            if name == "nvmlDeviceGetHandleByIndex" and args:
                self._labels[_address(got)] = f"gpu{args[0]}"
            elif name == "nvmlDeviceGetMigDeviceHandleByIndex" and len(args) == 2:
                self._labels[_address(got)] = f"{self._show(args[0])}.mig{args[1]}"
            self._record(name, args, got=got)
            return got

        return call

    def _record(
        self, name: str, args: tuple[Any, ...], got: Any = None, raised: BaseException | None = None
    ) -> None:
        device = next((self._show(a) for a in args if _is_handle(a)), SYSTEM)
        shown = [("&" + type(a._obj).__name__) if _is_byref(a) else self._show(a) for a in args]
        if raised is not None:
            value = f"raised {_error(raised)}"
        else:  # an out-parameter (a struct passed by reference) as the call filled it
            value = "; ".join(
                [f"= {self._show(got)}", *(f"&out {self._show(a._obj)}" for a in args if _is_byref(a))]
            )
        self._calls.append({"device": device.split(".")[0], "function": name, "args": shown, "value": value})

    def _show(self, value: Any) -> str:
        """The value as NVML gave it: numbers as they are, structs field by field, handles by label."""
        if _is_handle(value):
            address = _address(value)
            return self._labels.get(address, f"handle@{address:#x}" if address else "NULL")
        if isinstance(value, bytes):
            return repr(value.decode(errors="replace"))
        if isinstance(value, ctypes.Array):
            if getattr(value, "_type_", None) in (ctypes.c_ubyte, ctypes.c_uint8):
                return bytes(value).hex()
            return "[" + ", ".join(self._show(v) for v in value) + "]"
        if isinstance(value, ctypes.Structure):
            fields = [(f[0], getattr(value, f[0])) for f in value._fields_]
            return "{" + ", ".join(f"{f}: {_field(f, v) or self._show(v)}" for f, v in fields) + "}"
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(self._show(v) for v in value) + "]"
        if type(value).__name__ == "nvmlFriendlyObject":  # pynvml's process entries
            return "{" + ", ".join(f"{k}: {self._show(v)}" for k, v in vars(value).items()) + "}"
        return repr(value)

    def calls(self) -> list[dict[str, Any]]:
        return list(self._calls)


def _field(name: str, value: Any) -> str | None:
    """PCI ids in hex, as nvidia-smi prints them (NVML packs device and vendor: 0x20B210DE)."""
    return f"{value:#010x}" if name.endswith(("DeviceId", "SubSystemId")) and isinstance(value, int) else None


def _is_handle(value: Any) -> bool:
    return isinstance(value, ctypes._Pointer) and type(value).__name__.startswith("LP_struct_c_nvmlDevice")


def _is_byref(value: Any) -> bool:
    return type(value).__name__ == "CArgObject" and hasattr(value, "_obj")


def _address(pointer: Any) -> int:
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


def _error(exc: BaseException) -> str:
    code = getattr(exc, "value", None)
    return f"{type(exc).__name__} ({code})" if isinstance(code, int) else f"{type(exc).__name__}: {exc}"


def flat(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """A record's fields as (dotted name, value); lists kept whole."""
    if isinstance(data, dict):
        return [kv for k, v in data.items() for kv in flat(v, f"{prefix}{k}.")]
    return [(prefix.rstrip("."), data)]


def show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def call_text(c: dict[str, Any]) -> str:
    return f"{c['function']}({', '.join(c['args'])}) {c['value']}"


def compact(calls: list[dict[str, Any]]) -> list[str]:
    """The calls as lines, a run of one function over consecutive last arguments with one answer as one
    line (``nvmlDeviceGetNvLinkState(gpu0, 12..35) raised ...``)."""
    lines: list[str] = []
    run: list[dict[str, Any]] = []

    def flush() -> None:
        if len(run) > 2:
            first, last = run[0], run[-1]
            args = [*first["args"][:-1], f"{first['args'][-1]}..{last['args'][-1]}"]
            lines.append(call_text({**first, "args": args}))
        else:
            lines.extend(call_text(c) for c in run)
        run.clear()

    for c in calls:
        prev = run[-1] if run else None
        if prev is not None and not (
            (prev["function"], prev["args"][:-1], prev["value"])
            == (c["function"], c["args"][:-1], c["value"])
            and c["args"]
            and prev["args"][-1].isdigit()
            and c["args"][-1] == str(int(prev["args"][-1]) + 1)
        ):
            flush()
        run.append(c)
    flush()
    return lines


def read_nvml() -> tuple[HardwareFacts | None, list[dict[str, Any]] | None]:
    """envbuild's NVML facts and the raw calls behind them (None: no nvidia-ml-py to record)."""
    try:
        import pynvml
    except ImportError:
        return nvml_facts(), None
    recorder = RecordingNvml(pynvml)
    sys.modules["pynvml"] = recorder  # type: ignore[assignment]
    try:
        return nvml_facts(), recorder.calls()
    finally:
        sys.modules["pynvml"] = pynvml


def print_nvml(
    facts: HardwareFacts | None, calls: list[dict[str, Any]] | None, smi: HardwareFacts | None
) -> None:
    if calls is None:
        print("NVML: nvidia-ml-py (pynvml) is not importable")
    else:
        print(f"NVML: {len(calls)} calls through pynvml, each as envbuild made it, with what NVML answered")
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in calls or []:
        groups.setdefault(c["device"], []).append(c)
    for line in compact(groups.pop(SYSTEM, [])):
        print(f"  {SYSTEM}  {line}")
    devices = facts.devices if facts else ()
    smi_devices = {d.index: d for d in smi.devices} if smi else {}
    for label in sorted(set(groups) | {f"gpu{d.index}" for d in devices}):
        print(f"--- {label}: raw values (pynvml)")
        for line in compact(groups.get(label, [])):
            print(f"  {line}")
        dev = next((d for d in devices if f"gpu{d.index}" == label), None)
        if dev is None:
            print(f"--- {label}: no DeviceFacts (envbuild's reading stopped)")
            continue
        print(f"--- {label}: parsed DeviceFacts")
        for key, value in flat(to_data(dev)):
            print(f"  {key} = {show(value)}")
        other = smi_devices.get(dev.index)
        if other is None:
            continue
        theirs = dict(flat(to_data(other)))
        differ = [(k, v, theirs.get(k)) for k, v in flat(to_data(dev)) if v != theirs.get(k)]
        if not differ:
            print(f"--- {label}: nvidia-smi -q -x gives the same DeviceFacts")
        for key, mine, smi_value in differ:
            print(f"  differs from nvidia-smi -q -x: {key}: nvml {show(mine)}, smi {show(smi_value)}")
    if facts is None:
        print("NVML facts: none (NVML did not initialise, or a system query failed)")
        return
    print(
        f"NVML facts: driver {facts.driver_version}, CUDA {facts.runtime_version}, {len(devices)} device(s)"
    )
    prov = facts.provenance
    if prov is not None:
        print(
            f"provenance: nvml_version={prov.nvml_version!r} binding={prov.binding!r} "
            f"library={prov.library!r} binding_errors={list(prov.binding_errors)}"
        )


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    lock, xml, out_path = read_lock(Path(argv[1])), Path(argv[2]), Path(argv[3])
    nvml, calls = read_nvml()
    try:
        smi = parse_nvidia_xml(xml.read_text(encoding="utf-8"), "nvidia-smi -q -x") if xml.is_file() else None
    except CaptureError as exc:
        smi = None
        print("nvidia-smi -q -x:", exc)
    print_nvml(nvml, calls, smi)
    out: dict[str, Any] = {
        "nvml": to_data(nvml) if nvml else None,
        "nvidia_smi_q_x": to_data(smi) if smi else None,
        "nvml_calls": calls,
    }
    for name, facts in (("nvml", nvml), ("nvidia_smi_q_x", smi)):
        hw = judge_live(lock, facts, pids=own_pids()) if lock.backend in ("cuda", "rocm") else None
        out[f"verdicts_{name}"] = hw.section() if hw else None
        if hw is None:
            continue
        print(f"{name}: source {hw.facts.source if hw.facts else 'none (no answer)'}")
        for v in hw.verdicts:
            print(f"  {v['rule']:<13} {v['verdict']:<9} {' '.join(v['codes'])} {'; '.join(v['why'])}")
        for f in hw.findings:
            print(f"  {f.severity}: {f.code}: {f.message}")
    with out_path.open("w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=2, sort_keys=True)
        fh.write("\n")
    print("hardware.json written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
