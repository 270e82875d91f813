# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: what each device does per second, within a time budget (the ``performance`` stage).

Per device: dense matmul throughput in each dtype the device supports (fp32 with TF32 off, tf32 on a
CUDA build only: torch on ROCm does not use TF32 by default, bf16, fp16, fp8 where torch and the card
allow), device-memory copy bandwidth, and on a GPU host<->device
bandwidth with pinned memory; with several GPUs, the peer-access matrix and peer copy bandwidth per
pair.  The decision (envbuild/validate/performance.py) compares the figures with the card's datasheet.

Conventions, as nvbandwidth and nccl-tests state theirs:
* matmul: 2*n^3 floating-point operations per n x n product, from the wall time of a batch of products
  after a warm-up, the device synchronised before and after;
* copy bandwidth: bytes read + bytes written per second (a device-to-device copy of S bytes moves 2*S);
* host<->device and peer copies: bytes moved per second, one direction.

Sizes follow the device: no tensor set above ``max_fraction`` (50 %) of the memory free when the probe
starts, and the matmul size grows until one product takes long enough to time (or the cap).  Each
figure gets a share of the budget; when the budget is spent, what is left is reported as unmeasured.
"""

from __future__ import annotations

import os
import time
from typing import Any

from _probe_common import emit, error_text, read_args

args = read_args()
import torch  # noqa: E402

budget_s = float(args.get("budget_s", 60.0))
max_fraction = float(args.get("max_fraction", 0.5))
devices: list[str] = list(args.get("devices") or ["cpu"])
peer = bool(args.get("peer", True))
deadline = time.monotonic() + budget_s
MIN_TIMED_S = 0.02  # one timed batch must last at least this long to be read from a wall clock


def sync(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize(device)


def free_bytes(device: str) -> int:
    if device == "cpu":
        try:
            with open("/proc/meminfo", encoding="ascii") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 2 << 30
    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


def timed(fn: Any, device: str, share_s: float) -> tuple[float, int]:
    """(seconds per call, calls timed): a warm-up call, then batches until ``share_s`` has passed."""
    fn()
    sync(device)
    calls, elapsed, batch = 0, 0.0, 1
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        sync(device)
        calls += batch
        elapsed = time.perf_counter() - start
        if elapsed >= share_s or time.monotonic() >= deadline:
            return elapsed / calls, calls
        batch = min(batch * 2, 64)


def matmul_dtypes(device: str) -> list[str]:
    if device == "cpu":
        return ["float32"]
    hip = getattr(torch.version, "hip", None)
    # TF32: NVIDIA tensor cores; a HIP build of torch does not use TF32 by default, so it is not measured.
    names = ["float32", "bfloat16", "float16"] if hip else ["float32", "tf32", "bfloat16", "float16"]
    major, minor = torch.cuda.get_device_capability(device)
    # FP8 tensor cores: NVIDIA sm_89 (Ada) and sm_90+ (torch._scaled_mm); ROCm's fp8 types differ by
    # arch (fnuz on gfx942), left out here.
    if not hip and (major, minor) >= (8, 9) and hasattr(torch, "_scaled_mm"):
        names.append("float8_e4m3fn")
    return names


def product(device: str, dtype_name: str, size: int) -> Any:
    """A function computing one size x size product in ``dtype_name`` on ``device``."""
    dtype = torch.float32 if dtype_name == "tf32" else getattr(torch, dtype_name)
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    if dtype_name.startswith("float8"):
        one = torch.ones((), device=device)
        bt = b.t().contiguous().t()  # _scaled_mm takes its second operand column-major
        return lambda: torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return lambda: a @ b


def matmul(device: str, dtype_name: str, share_s: float, memory: int) -> dict[str, Any]:
    """Dense products, doubling the size from 256 (CPU) / 1024 (GPU) until one product lasts long enough
    to time, up to the cap and the memory allowed."""
    entry: dict[str, Any] = {"device": device, "dtype": dtype_name}
    if device != "cpu":
        torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    fp8 = dtype_name.startswith("float8")
    itemsize = 1 if fp8 else (4 if dtype_name in ("float32", "tf32") else 2)
    per_element = 2 * itemsize + (2 if fp8 else itemsize)  # two operands and the product
    cap = min(4096 if device == "cpu" else 16384, int((memory / per_element) ** 0.5))
    size = min(256 if device == "cpu" else 1024, cap)
    if size < 64:
        entry["error"] = f"not enough free memory for a product ({memory} bytes allowed)"
        return entry
    run = product(device, dtype_name, size)
    while size * 2 <= cap and time.monotonic() < deadline:
        per_call, _ = timed(run, device, 0.0)
        if per_call >= MIN_TIMED_S / 4:
            break
        size *= 2
        run = product(device, dtype_name, size)
    per_call, calls = timed(run, device, share_s)
    entry.update(size=size, calls=calls, seconds=round(per_call * calls, 4))
    entry["tflops"] = round(2 * size**3 / per_call / 1e12, 4)
    return entry


def copy_bandwidth(device: str, share_s: float, memory: int) -> dict[str, Any]:
    size = max(1 << 20, min((256 << 20) if device == "cpu" else (1 << 30), memory // 2))
    src = torch.empty(size, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    per_call, calls = timed(lambda: dst.copy_(src), device, share_s)
    return {"device": device, "bytes": size, "calls": calls, "gbs": round(2 * size / per_call / 1e9, 2)}


def host_bandwidth(device: str, share_s: float, memory: int) -> list[dict[str, Any]]:
    size = max(1 << 20, min(256 << 20, memory // 2))
    host = torch.empty(size, dtype=torch.uint8).pin_memory()
    dev = torch.empty(size, dtype=torch.uint8, device=device)
    out = []
    for name, fn in (
        ("host_to_device", lambda: dev.copy_(host, non_blocking=True)),
        ("device_to_host", lambda: host.copy_(dev, non_blocking=True)),
    ):
        per_call, calls = timed(fn, device, share_s / 2)
        out.append({"device": device, "direction": name, "bytes": size, "calls": calls,
                    "gbs": round(size / per_call / 1e9, 2)})  # fmt: skip
    return out


def peers(share_s: float, memories: dict[str, int]) -> dict[str, Any]:
    count = len(devices)
    access = [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(count)] for i in range(count)]
    pairs = []
    share = share_s / max(1, count * (count - 1))
    for i in range(count):
        for j in range(count):
            if i == j:
                continue
            size = max(1 << 20, min(256 << 20, memories[devices[i]] // 4, memories[devices[j]] // 4))
            src = torch.empty(size, dtype=torch.uint8, device=f"cuda:{i}").fill_(1)
            dst = torch.empty(size, dtype=torch.uint8, device=f"cuda:{j}")

            def copy(dst: Any = dst, src: Any = src) -> Any:
                return dst.copy_(src)

            torch.cuda.synchronize(i)
            per_call, calls = timed(copy, f"cuda:{j}", share)
            pairs.append({"src": i, "dst": j, "peer_access": access[i][j], "bytes": size, "calls": calls,
                          "gbs": round(size / per_call / 1e9, 2)})  # fmt: skip
            del src, dst
    return {"access": access, "pairs": pairs}


def main() -> None:
    """Every figure of every device, in turn, each with its share of what is left of the budget."""
    figures: dict[str, Any] = {"matmul": [], "memory_copy": [], "host": [], "unmeasured": []}
    memories: dict[str, int] = {}
    for device in devices:
        memories[device] = int(free_bytes(device) * max_fraction)
    plan: list[tuple[str, str, str]] = []  # (kind, device, dtype)
    for device in devices:
        plan += [("matmul", device, d) for d in matmul_dtypes(device)]
        plan.append(("memory_copy", device, ""))
        if device != "cpu":
            plan.append(("host", device, ""))
    if peer and len(devices) > 1 and all(d != "cpu" for d in devices):
        plan.append(("peer", "", ""))
    for n, (kind, device, dtype_name) in enumerate(plan):
        left = deadline - time.monotonic()
        if left <= 0:
            figures["unmeasured"].append({"figure": kind, "device": device, "dtype": dtype_name})
            continue
        share = left / (len(plan) - n) * 0.8  # the rest of the share covers sizing and warm-up
        try:
            if kind == "matmul":
                figures["matmul"].append(matmul(device, dtype_name, share, memories[device]))
            elif kind == "memory_copy":
                figures["memory_copy"].append(copy_bandwidth(device, share, memories[device]))
            elif kind == "host":
                figures["host"] += host_bandwidth(device, share, memories[device])
            else:
                figures["peer"] = peers(share, memories)
        except Exception as exc:
            figures.setdefault("errors", []).append(
                {"figure": kind, "device": device, "dtype": dtype_name, "error": error_text(exc)}
            )
        if device not in ("", "cpu"):
            torch.cuda.empty_cache()
    if devices != ["cpu"]:
        torch.backends.cuda.matmul.allow_tf32 = False
    figures.update(
        torch_version=torch.__version__,
        budget_s=budget_s,
        seconds=round(budget_s - (deadline - time.monotonic()), 3),
        threads=torch.get_num_threads(),
        cpus=os.cpu_count(),
        names={d: (torch.cuda.get_device_name(d) if d != "cpu" else "cpu") for d in devices},
        free_bytes_used_max=memories,
    )
    emit(figures)


if __name__ == "__main__":  # the worker and a one-shot run both run it as __main__
    main()
