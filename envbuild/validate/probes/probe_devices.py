# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: every device torch sees (name, capability / gcnArchName, memory, SMs) and torch's arch list."""

from __future__ import annotations

from typing import Any

from _probe_common import emit, read_args

read_args()
import torch  # noqa: E402 - after reading the arguments, so a broken torch still consumes stdin

devices: list[dict[str, Any]] = []
for index in range(torch.cuda.device_count()):
    props = torch.cuda.get_device_properties(index)
    entry: dict[str, Any] = {
        "index": index,
        "name": props.name,
        "major": props.major,
        "minor": props.minor,
        "total_memory": int(props.total_memory),
        "multi_processor_count": int(props.multi_processor_count),
    }
    # ROCm builds only: CUDA builds have the attribute too (torch 2.11.0+cu130 on an H200 answers
    # "NVIDIA H200", the device's name), which read as the arch made every NVIDIA device uncovered.
    gcn = getattr(props, "gcnArchName", None) if torch.version.hip else None
    if gcn:
        entry["gcnArchName"] = gcn
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        entry["uuid"] = str(uuid)
    devices.append(entry)
emit(
    {
        "torch_version": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "arch_list": list(torch.cuda.get_arch_list()) if torch.cuda.is_available() else [],
        "devices": devices,
    }
)
