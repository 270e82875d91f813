# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: checkpoint round trip.  ``mode=save``: train a tiny model, record an uninterrupted run, then
re-run from the same seed, save a checkpoint mid-way.  ``mode=resume`` (a fresh process): load the
checkpoint, continue, and compare with the uninterrupted run (bitwise on CPU, tolerance on GPU).

Data batches and dropout draw from the RNGs, so a resume that forgets any RNG state diverges.
``dir`` is a fresh folder the validator created for this run (and removes after it).  The checkpoint is
serialised in memory and written with a plain ``open``/``write``, so a folder that cannot take it fails
with the OSError's errno (reported as ``os_error``), not a crash.
"""

from __future__ import annotations

import errno
import io
import os
import random
import time
from typing import Any

from _probe_common import emit, read_args

args = read_args()
import torch  # noqa: E402

ckpt_dir: str = args["dir"]
device: str = args.get("device", "cpu")
total_steps = int(args.get("steps", 8))
save_at = total_steps // 2
ckpt_path = os.path.join(ckpt_dir, "checkpoint.pt")
ref_path = os.path.join(ckpt_dir, "reference.pt")


def build() -> tuple[Any, Any, Any]:
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(32, 1)
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return model, opt, sched


def step(model: Any, opt: Any, sched: Any) -> None:
    x = torch.randn(32, 16, device=device)
    y = x.sum(dim=1, keepdim=True) * 0.1 + random.random()
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()


def seed() -> None:
    random.seed(1234)
    torch.manual_seed(1234)


def params(model: Any) -> Any:
    return torch.cat([p.detach().flatten().cpu() for p in model.parameters()])


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if device != "cpu":
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def save_atomic(obj: Any, path: str) -> None:
    buf = io.BytesIO()
    torch.save(obj, buf)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(buf.getbuffer())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def save_run() -> dict[str, Any]:
    os.makedirs(ckpt_dir, exist_ok=True)
    seed()
    model, opt, sched = build()
    for _ in range(total_steps):
        step(model, opt, sched)
    save_atomic(params(model), ref_path)
    seed()
    model, opt, sched = build()
    for _ in range(save_at):
        step(model, opt, sched)
    start = time.perf_counter()
    save_atomic(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(),
            "rng": rng_state(),
            "step": save_at,
        },
        ckpt_path,
    )
    return {
        "write_seconds": round(time.perf_counter() - start, 4),
        "size_bytes": os.path.getsize(ckpt_path),
        "path": ckpt_path,
        "saved_step": save_at,
    }


def resume_run() -> dict[str, Any]:
    start = time.perf_counter()
    # Load on the CPU: RNG states must stay CPU ByteTensors; load_state_dict copies onto the device.
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    read_seconds = time.perf_counter() - start
    model, opt, sched = build()
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    random.setstate(state["rng"]["python"])
    torch.set_rng_state(state["rng"]["torch"])
    if "cuda" in state["rng"]:
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    for _ in range(state["step"], total_steps):
        step(model, opt, sched)
    got = params(model)
    want = torch.load(ref_path, weights_only=True)
    return {
        "read_seconds": round(read_seconds, 4),
        "resumed_from_step": state["step"],
        "steps": total_steps,
        "bitwise_equal": bool(torch.equal(got, want)),
        "max_abs_diff": float((got - want).abs().max()),
        "numel": int(got.numel()),
    }


try:
    emit(save_run() if args["mode"] == "save" else resume_run())
except OSError as exc:
    code = exc.errno or 0
    emit(
        {
            "os_error": {
                "errno": errno.errorcode.get(code, str(code)),
                "strerror": exc.strerror or os.strerror(code),
                "path": exc.filename or ckpt_dir,
            }
        }
    )
