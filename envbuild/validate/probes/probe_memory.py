# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: allocate the declared per-card need (plus a margin) on every device; report free and total."""

from __future__ import annotations

import time
from typing import Any

from _probe_common import emit, error_text, read_args

args = read_args()
import torch  # noqa: E402

need_bytes = int(args["need_bytes"])
results: list[dict[str, Any]] = []
for index in range(torch.cuda.device_count()):
    entry: dict[str, Any] = {"index": index, "need_bytes": need_bytes}
    try:
        free, total = torch.cuda.mem_get_info(index)
        entry.update(free_bytes=int(free), total_bytes=int(total))
        start = time.perf_counter()
        block = torch.empty(need_bytes, dtype=torch.uint8, device=f"cuda:{index}")
        block.fill_(0xA5)  # touch every page
        sample = int(block[need_bytes - 1].item())
        torch.cuda.synchronize(index)
        entry.update(
            allocated=True, seconds=round(time.perf_counter() - start, 3), readback_ok=sample == 0xA5
        )
        del block
        torch.cuda.empty_cache()
    except Exception as exc:
        entry.update(allocated=False, error=error_text(exc))
    results.append(entry)
emit({"devices": results})
