# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: a matrix product on each device against a float64 CPU reference, with fresh random inputs.

The reference is computed from the *rounded* inputs, so the error measures only the device's
arithmetic; it is normalised by ``max(|A| @ |B|)`` (the scale an accumulation error is bounded by).
"""

from __future__ import annotations

import math
import time
from typing import Any

from _probe_common import emit, error_text, read_args

args = read_args()
import torch  # noqa: E402

TOLERANCE = {"float32": 1e-4, "float16": 4e-3, "bfloat16": 3e-2, "float64": 1e-12}
n = int(args.get("size", 512))
devices: list[str] = list(args.get("devices") or ["cpu"])
gen = torch.Generator().manual_seed(int.from_bytes(__import__("os").urandom(4), "little"))

try:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
except Exception:
    pass

checks: list[dict[str, Any]] = []
for device in devices:
    dtypes = ["float32"] if device == "cpu" else ["float32", "bfloat16", "float16"]
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        entry: dict[str, Any] = {"device": device, "dtype": dtype_name, "size": n}
        try:
            a = torch.randn(n, n, generator=gen).to(dtype)
            b = torch.randn(n, n, generator=gen).to(dtype)
            ref = a.double() @ b.double()
            scale = float((a.double().abs() @ b.double().abs()).max())
            da, db = a.to(device), b.to(device)
            out = da @ db
            if device != "cpu":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            reps = 5
            for _ in range(reps):
                out = da @ db
            if device != "cpu":
                torch.cuda.synchronize(device)
            elapsed = (time.perf_counter() - start) / reps
            result = out.double().cpu()
            finite = bool(torch.isfinite(result).all())
            err = float((result - ref).abs().max()) / scale if finite else math.inf
            entry.update(
                finite=finite,
                rel_error=err if finite else None,
                tolerance=TOLERANCE[dtype_name],
                ok=finite and err <= TOLERANCE[dtype_name],
                gflops=round(2 * n**3 / elapsed / 1e9, 1) if elapsed > 0 else None,
            )
        except Exception as exc:
            entry.update(ok=False, error=error_text(exc))
        checks.append(entry)
emit({"checks": checks, "torch_version": torch.__version__})
