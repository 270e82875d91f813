# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: torch's build variant and what accelerator torch can see (no device is touched beyond init)."""

from __future__ import annotations

import glob
import os
from typing import Any

from _probe_common import emit, error_text, read_args

read_args()
facts: dict[str, Any] = {
    "dev_nodes": sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/kfd") + glob.glob("/dev/dri/renderD*")),
    "env": {
        k: os.environ.get(k)
        for k in (
            "NVIDIA_VISIBLE_DEVICES",
            "CUDA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "ROCR_VISIBLE_DEVICES",
            "NVIDIA_DRIVER_CAPABILITIES",
        )
    },
}
try:
    import torch
except Exception as exc:
    facts["torch_import_error"] = error_text(exc)
    emit(facts)
    raise SystemExit(0) from None

facts["torch_version"] = torch.__version__
facts["cuda"] = torch.version.cuda
facts["hip"] = getattr(torch.version, "hip", None)
facts["arch_list"] = []
try:
    available = bool(torch.cuda.is_available())
    facts["available"] = available
    facts["device_count"] = int(torch.cuda.device_count()) if available else 0
    if facts["cuda"] or facts["hip"]:
        try:
            torch.cuda.init()
        except Exception as exc:
            facts["init_error"] = error_text(exc)
        if available:
            facts["arch_list"] = list(torch.cuda.get_arch_list())
except Exception as exc:
    facts["available"] = False
    facts["device_count"] = 0
    facts["init_error"] = error_text(exc)
emit(facts)
