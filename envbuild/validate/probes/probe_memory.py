# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: allocate the declared per-card need (plus a margin) on every device; report free and total.

Raw facts for the decision: the bytes really allocated, the fill pattern, and the bytes read back from
the first, middle and last position (the decision re-checks them; ``allocated``/``readback_ok`` are
the probe's own verdict, kept for the report).
"""

from __future__ import annotations

import time
from typing import Any

from _probe_common import emit, error_text, read_args

args = read_args()
import torch  # noqa: E402

need_bytes = int(args["need_bytes"])
PATTERN = 0xA5
results: list[dict[str, Any]] = []
for index in range(torch.cuda.device_count()):
    entry: dict[str, Any] = {"index": index, "need_bytes": need_bytes}
    try:
        free, total = torch.cuda.mem_get_info(index)
        entry.update(free_bytes=int(free), total_bytes=int(total))
        start = time.perf_counter()
        block = torch.empty(need_bytes, dtype=torch.uint8, device=f"cuda:{index}")
        block.fill_(PATTERN)  # touch every page
        samples = [int(block[i].item()) for i in (0, need_bytes // 2, need_bytes - 1)]
        torch.cuda.synchronize(index)
        entry.update(
            allocated=True,
            allocated_bytes=int(block.numel() * block.element_size()),
            pattern=PATTERN,
            readback=samples,
            seconds=round(time.perf_counter() - start, 3),
            readback_ok=all(sample == PATTERN for sample in samples),
        )
        del block
        torch.cuda.empty_cache()
    except Exception as exc:
        entry.update(allocated=False, error=error_text(exc))
    results.append(entry)
emit({"devices": results})
