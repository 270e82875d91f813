# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: an all-reduce sweep through torch.distributed, one process per device (``performance`` stage).

The probe starts ``world`` copies of itself (``--rank R``), which join one group through torch's
``TCPStore`` at ``store`` (a loopback port the probe chose, or node 0's ``HOST:PORT+1`` with ``--fleet``;
never the c10d rendezvous: it unpickles peers' state from an unauthenticated store), with NCCL on CUDA
(RCCL on ROCm) and gloo on the CPU.  Rank 0 binds the store's socket itself, to that host only, and
hands it to ``TCPStore`` (``master_listen_fd``): given a host, ``TCPStore`` would listen on every
interface.  Only tensors cross between the ranks.

Before anything is measured every rank proves it belongs: an all-gather of its ``proofs[rank]`` (32
bytes as uint8, which gloo and NCCL both carry), each checked against the expected list by every rank.
With ``--fleet`` the proofs are HMACs of the run's nonce and the rank under the fleet token, made by
envbuild (the token never reaches this process); on one machine they are random.  A rank whose proof
does not match is reported (``unproven``) and the group measures nothing.

Each size is all-reduced (sum, float32) after a warm-up, timed on rank 0 with the devices synchronised,
and reported with nccl-tests' definitions (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md):
algorithm bandwidth = bytes / time, bus bandwidth = algbw x 2(n-1)/n.  Every rank checks the sum.

Sizes double from 1 MiB up to ``max_bytes``.  The ranks' start-up (importing torch, joining the group:
NCCL/gloo initialisation) is not charged to the sweep: its budget (``budget_s``) starts once every rank
has joined (a barrier after ``init_process_group``), and bounds only the sizes above ``min_bytes``
(64 MiB), which are always measured once the group forms.  Only the probe's own limit (``limit_s``, the
caller's, before which the ranks are killed) cuts a sweep short of them.  Rank 0 decides after each size
whether to measure the next and broadcasts it, so every rank stops at the same size.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from typing import Any

RANK_MARKER = "ENVBUILD-RANK "
MIN_BYTES = 64 << 20  # always swept once the group forms (up to max_bytes)
STOPS = ("max_bytes", "budget", "time limit")  # why a sweep ends, as rank 0 broadcasts it (its index)


def stop_after(size: int, now: float, started: float, took: float, cfg: dict[str, Any]) -> str | None:
    """Why the sweep ends after ``size`` (None: measure twice ``size`` next).  ``now`` and ``started``
    (the group formed) are rank 0's monotonic clock, ``took`` the seconds ``size`` took, ``cfg["stop_s"]``
    when (on that clock) the ranks must be done before the probe's limit."""
    if size * 2 > int(cfg["max_bytes"]):
        return "max_bytes"
    if now + 2 * took >= float(cfg["stop_s"]):  # the next size takes about twice as long
        return "time limit"
    if size * 2 > int(cfg.get("min_bytes", MIN_BYTES)) and now >= started + float(cfg["budget_s"]):
        return "budget"
    return None


def rank_main(rank: int) -> None:
    """One rank: join, sweep, print rank 0's figures (every rank prints its sum check)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    cfg = json.loads(os.environ["ENVBUILD_COLLECTIVE"])
    world, backend = int(cfg["world"]), str(cfg["backend"])
    local = int(os.environ.get("ENVBUILD_LOCAL_RANK", rank))  # this lot's device; a fleet runs one per lot
    device = f"cuda:{local}" if backend == "nccl" else "cpu"
    if backend == "nccl":
        torch.cuda.set_device(local)
    timeout = timedelta(seconds=float(cfg["timeout_s"]))
    # said first, so that a rank killed while waiting for its group says where it waited
    print(f"envbuild: rank {rank} of {world} joins the group at {cfg['store']}", file=sys.stderr, flush=True)
    store = open_store(str(cfg["store"]), rank, world, timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
    unproven = prove(rank, world, [str(p) for p in cfg["proofs"]], device)
    if unproven:  # not every rank is one of ours: measure nothing, name them
        print(RANK_MARKER + json.dumps({"rank": rank, "sums_ok": False, "sizes": [], "unproven": unproven}))
        sys.stdout.flush()
        dist.destroy_process_group()
        return
    dist.barrier()  # every rank has joined: the sweep's budget starts now, start-up is not charged to it
    started = time.monotonic()
    startup_s = round(time.time() - float(cfg["launched_unix"]), 3)
    # the probe's limit, on this clock (rank 0's is the one that decides)
    cfg["stop_s"] = started + float(cfg["stop_unix"]) - time.time()
    rows: list[dict[str, Any]] = []
    size = 1 << 20
    ok = True
    stopped = "max_bytes"
    while size <= int(cfg["max_bytes"]):
        began = time.monotonic()
        n = size // 4
        x = torch.full((n,), float(rank + 1), dtype=torch.float32, device=device)
        dist.all_reduce(x)  # warm-up (NCCL builds its rings and channels on the first calls) and check
        expected = float(world * (world + 1) // 2)
        ok = ok and bool(torch.allclose(x[: min(n, 1024)].cpu(), torch.full((min(n, 1024),), expected)))
        x.zero_()  # timed on zeros: the sums cannot overflow however many calls are timed
        dist.all_reduce(x)
        # One timed call, then rank 0 chooses how many calls to time (every rank must make the same
        # number of collective calls, or the group deadlocks).
        start = time.perf_counter()
        dist.all_reduce(x)
        if backend == "nccl":
            torch.cuda.synchronize(device)
        count = torch.tensor(
            [max(3.0, min(200.0, 0.05 / max(time.perf_counter() - start, 1e-6)))], device=device
        )
        dist.broadcast(count, 0)
        iters = int(count.item())
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        if backend == "nccl":
            torch.cuda.synchronize(device)
        seconds = (time.perf_counter() - start) / iters
        algbw = size / seconds / 1e9
        rows.append(
            {
                "bytes": size,
                "seconds": round(seconds, 6),
                "algbw_gbs": round(algbw, 3),
                "busbw_gbs": round(algbw * 2 * (world - 1) / world, 3),
            }
        )
        # every rank takes rank 0's decision (the same number of collective calls on each, or a deadlock)
        now = time.monotonic()
        why = stop_after(size, now, started, now - began, cfg) if rank == 0 else None
        code = torch.tensor([float(STOPS.index(why)) if why else -1.0], device=device)
        dist.broadcast(code, 0)
        if int(code.item()) >= 0:
            stopped = STOPS[int(code.item())]
            break
        size *= 2
    dist.destroy_process_group()
    answer = {"rank": rank, "sums_ok": ok, "sizes": rows, "startup_s": startup_s, "stopped": stopped}
    print(RANK_MARKER + json.dumps(answer))


def open_store(address: str, rank: int, world: int, timeout: Any) -> Any:
    """torch's ``TCPStore`` at ``HOST:PORT``: rank 0 binds the socket to HOST itself (``TCPStore`` given
    a host listens on every interface) and hands it over (``detach``: the store's server owns it now);
    the others connect, retrying until ``timeout``.  The libuv server (torch's default from 2.4) listens
    on a socket handed to it only from torch 2.8 (pytorch/pytorch#150215): before, the older server,
    which always did, is asked for."""
    import torch
    import torch.distributed as dist

    store_class: Any = dist.TCPStore  # type: ignore[attr-defined,unused-ignore]
    host, _, port_text = address.rpartition(":")
    host, port = host.strip("[]"), int(port_text)
    if rank != 0:
        return store_class(host, port, world, False, timeout)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.create_server((host, port), family=family)
    found = re.match(r"(\d+)\.(\d+)", str(torch.__version__))
    version = (int(found.group(1)), int(found.group(2))) if found else (99, 0)
    older = {"use_libuv": False} if (2, 2) <= version < (2, 8) else {}
    fd = listening.detach()
    try:
        return store_class(host, port, world, True, timeout, master_listen_fd=fd, **older)
    except TypeError:  # a torch without master_listen_fd: every interface, the proofs still guard the group
        os.close(fd)
        return store_class(host, port, world, True, timeout)


def prove(rank: int, world: int, proofs: list[str], device: str) -> list[int]:
    """All-gather each rank's proof (32 bytes as uint8); the ranks whose proof is not the expected one."""
    import torch
    import torch.distributed as dist

    mine = torch.tensor(list(bytes.fromhex(proofs[rank])), dtype=torch.uint8, device=device)
    gathered = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    return [r for r, got in enumerate(gathered) if bytes(got.cpu().tolist()) != bytes.fromhex(proofs[r])]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    from _probe_common import emit, read_args

    args = read_args()
    world = int(args.get("world", 2))
    backend = str(args.get("backend", "gloo"))
    budget_s = float(args.get("budget_s", 20.0))
    timeout_s = float(args.get("timeout_s", 60.0))
    # The ranks are killed at the probe's limit: the caller's (limit_s), or the ranks' start-up (each
    # joins within timeout_s), the sweep and its budget, and the tearing down; they stop sweeping a
    # margin before it, so that what was measured is reported.
    limit_s = min(float(args.get("limit_s", 1e9)), budget_s + 2 * timeout_s)
    margin_s = min(15.0, 0.2 * limit_s)
    # The ranks this machine runs: all of them on one machine; one per lot in a fleet (``rank``), which
    # joins the group node 0 set up (``store`` and ``proofs``, after envbuild's handshake).
    ranks = [int(args["rank"])] if "rank" in args else list(range(world))
    cfg: dict[str, Any] = {
        "world": world,
        "backend": backend,
        "store": str(args.get("store") or f"127.0.0.1:{free_port()}"),
        "proofs": [str(p) for p in args.get("proofs") or [secrets.token_hex(32) for _ in range(world)]],
        "budget_s": budget_s,
        "launched_unix": time.time(),
        "stop_unix": time.time() + limit_s - margin_s,
        "timeout_s": timeout_s,
        "max_bytes": int(args.get("max_bytes", 256 << 20)),
        "min_bytes": int(args.get("min_bytes", MIN_BYTES)),
    }
    env = {**os.environ, "ENVBUILD_COLLECTIVE": json.dumps(cfg)}
    if backend == "gloo" and "rank" not in args:
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--rank", str(r)],
            env={**env, "ENVBUILD_LOCAL_RANK": str(n)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, r in enumerate(ranks)
    ]
    limit = time.monotonic() + limit_s
    outs: list[tuple[int | None, str, str]] = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=max(1.0, limit - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            out, err = proc.communicate()
        outs.append((proc.returncode, out, err))
    answers: list[dict[str, Any]] = []
    errors: list[str] = []
    for r, (code, out, err) in zip(ranks, outs, strict=True):
        line = next((ln for ln in out.splitlines() if ln.startswith(RANK_MARKER)), None)
        if code != 0 or line is None:
            tail = (err.strip().splitlines() or ["no output"])[-1][:300]
            errors.append(f"rank {r} exited with status {code}: {tail}")
            continue
        answers.append(json.loads(line[len(RANK_MARKER) :]))
    done = sorted(answers, key=lambda a: int(a["rank"]))
    unproven = sorted({int(r) for a in done for r in a.get("unproven") or []})
    if unproven:
        errors.append(f"rank(s) {unproven} of the group could not prove they belong: nothing was measured")
    emit(
        {
            "backend": backend,
            "world": world,
            "ranks": ranks,
            "init": "tcp store (rank 0 bound it to its host)" if "store" in args else "tcp store (loopback)",
            "unproven": unproven,
            "sizes": done[0]["sizes"] if done and not unproven else [],
            "budget_s": budget_s,
            "min_bytes": cfg["min_bytes"],
            "startup_s": done[0].get("startup_s") if done else None,  # launch to the group formed (rank 0)
            "stopped": done[0].get("stopped") if done else None,
            "sums_ok": bool(done) and len(done) == len(ranks) and all(a["sums_ok"] for a in done),
            "errors": errors,
        }
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]))
    else:
        main()
