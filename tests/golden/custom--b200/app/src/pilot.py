"""Pilot run for the envbuild example profiles: crosses the whole (tiny) application once.

It reads ``config/pilot.json`` (12 identified documents, one of which must be rejected), scores every
accepted document with a small torch computation on the best available device (CUDA/ROCm when present,
else CPU), checks the result against a float64 CPU reference, and writes ``<out_dir>/results.jsonl``
(one line per document) and ``<out_dir>/summary.json`` (counts, rejections with reasons, device,
parameters).  It exits non-zero when any invariant fails: accepted + rejected == total, every identity
exactly once, every rejection with a reason, GPU numbers matching the CPU reference.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def reject_reason(doc: dict[str, Any], seen: set[str], max_chars: int) -> str | None:
    doc_id = doc.get("id")
    text = doc.get("text")
    if not isinstance(doc_id, str) or not doc_id:
        return "missing id"
    if doc_id in seen:
        return "duplicate id"
    if not isinstance(text, str) or not text.strip():
        return "empty text"
    if len(text) > max_chars:
        return f"text longer than {max_chars} characters"
    return None


def score(texts: list[str], hidden: int, seed: int, device: torch.device) -> tuple[list[float], float]:
    """A deterministic bag-of-bytes projection; returns scores and the max error against float64 CPU."""
    counts = torch.zeros(len(texts), 256, dtype=torch.float64)
    for row, text in enumerate(texts):
        for byte in text.encode("utf-8"):
            counts[row, byte] += 1.0
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(256, hidden, generator=generator, dtype=torch.float64)
    reference = torch.tanh(counts @ weights / 16.0).sum(dim=1)
    result = torch.tanh(counts.float().to(device) @ weights.float().to(device) / 16.0).sum(dim=1)
    if device.type == "cuda":
        torch.cuda.synchronize()
    error = (result.double().cpu() - reference).abs().max().item() if texts else 0.0
    return [round(float(v), 6) for v in reference], float(error)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/pilot.json")
    parser.add_argument("--out", default=None, help="output folder (default: out_dir from the config)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    documents: list[dict[str, Any]] = config["documents"]
    out = Path(args.out or config["out_dir"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    seen: set[str] = set()
    accepted: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for doc in documents:
        reason = reject_reason(doc, seen, int(config["max_chars"]))
        if isinstance(doc.get("id"), str):
            seen.add(doc["id"])
        (rejected if reason else accepted).append({"id": doc.get("id"), "reason": reason, "doc": doc})
    scores, error = score(
        [a["doc"]["text"] for a in accepted], int(config["hidden"]), int(config["seed"]), device
    )

    results = [
        {"id": a["id"], "status": "accepted", "score": s} for a, s in zip(accepted, scores, strict=True)
    ]
    results += [{"id": r["id"], "status": "rejected", "reason": r["reason"]} for r in rejected]
    ids = [r["id"] for r in results]
    problems = []
    if len(accepted) + len(rejected) != len(documents):
        problems.append("accepted + rejected != total")
    if len(set(ids)) != len(ids) or sorted(map(str, ids)) != sorted(str(d.get("id")) for d in documents):
        problems.append("identities are not each present exactly once")
    if any(not r["reason"] for r in rejected):
        problems.append("a rejection has no reason")
    if error > 1e-3:
        problems.append(f"device result differs from the CPU reference by {error:.3g}")

    summary = {
        "run": config["run_name"],
        "ok": not problems,
        "problems": problems,
        "counts": {"total": len(documents), "accepted": len(accepted), "rejected": len(rejected)},
        "rejections": [{"id": r["id"], "reason": r["reason"]} for r in rejected],
        "device": device.type,
        "device_name": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "max_abs_error": error,
        "parameters": {"config": args.config, "seed": config["seed"], "hidden": config["hidden"]},
        "seconds": round(time.monotonic() - started, 3),
    }
    write_atomic(out / "results.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in results))
    write_atomic(out / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    print(json.dumps(summary["counts"]), "ok" if not problems else "; ".join(problems))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
