"""``envbuild catalog show``: the catalog in force, built-in data files and the user's overlay."""

from __future__ import annotations

import hashlib
from typing import Any

from envbuild.boundary import to_data
from envbuild.catalog import load_catalog
from envbuild.catalog.loader import FILES
from envbuild.catalog.overlay import STALE_DAYS, overlay_path
from envbuild.catalog.overlay_pairs import compare
from envbuild.resources import catalog_dir


def describe() -> dict[str, Any]:
    cat = load_catalog()
    state = cat.overlay
    overlay: dict[str, Any] | None = None
    if state is not None and state.overlay is None:
        overlay = {"path": str(state.path), "error": state.error, "in_force": False}
    elif state is not None and state.overlay is not None:
        o = state.overlay
        age = state.age_days() or 0
        overlay = {
            "path": str(state.path),
            "in_force": True,
            "fetched_at": o.fetched_at.isoformat(),
            "age_days": age,
            "stale": age > STALE_DAYS,
            "envbuild_version": o.envbuild_version,
            "indexes": to_data(o.indexes),
            "counts": {
                "torch": len(o.torch),
                "torch_confirmed": sum(r.confirmed for r in o.torch),
                **{
                    n: sum(c.name == n for c in o.companions) for n in ("torchvision", "torchaudio", "triton")
                },
                "bpy": len(o.bpy),
            },
            "usable": {v: [*u.unconfirmed, *(n for _, n in u.variants)] for v, u in state.usable.items()},
            "unusable": list(state.unusable),
            "disagreements": list(compare(load_catalog(catalog_dir()).torch, o)),
        }
    from_overlay = set(state.usable) if state is not None else set()
    torch = []
    for rel in cat.releases:
        patches = [
            {
                "version": p.version,
                "torchvision": p.torchvision,
                "torchaudio": p.torchaudio,
                "triton": p.triton,
                "tier": p.tier,
                "origin": "overlay" if p.version in from_overlay else "built-in",
            }
            for p in rel.patch
        ]
        torch.append(
            {
                "series": rel.series,
                "status": rel.status,
                "tier": rel.tier,
                "origin": "overlay" if all(p["origin"] == "overlay" for p in patches) else "built-in",
                "python": list(rel.python),
                "pypi_default_cuda": rel.pypi_default_cuda,
                "variants": [{"variant": w.variant, "tier": w.tier} for w in rel.cuda]
                + [{"variant": w.variant, "tier": w.tier} for w in rel.rocm],
                "patches": patches,
            }
        )
    known_bpy = {v for s in cat.blender.series for v in s.releases}
    bpy_new = (
        [b.version for b in state.overlay.bpy if b.version not in known_bpy]
        if state and state.overlay
        else []
    )
    return {
        "built_in": [
            {"name": name, "sha256": hashlib.sha256((catalog_dir() / name).read_bytes()).hexdigest()}
            for name in FILES
        ],
        "overlay": overlay,
        "overlay_path": str(state.path if state is not None else _path()),
        "torch": torch,
        "blender": [
            {"series": s.series, "tier": s.tier, "releases": list(s.releases)} for s in cat.blender.series
        ],
        "bpy_only_in_overlay": bpy_new,
    }


def _path() -> str:
    try:
        return str(overlay_path())
    except RuntimeError:
        return "(no home folder)"


def render_text(data: dict[str, Any]) -> str:
    lines = ["built-in data files (envbuild/data):"]
    lines += [f"  {f['name']:<15} sha256 {f['sha256']}" for f in data["built_in"]]
    o = data["overlay"]
    if o is None:
        lines.append(
            f"overlay: none ({data['overlay_path']} does not exist; `envbuild catalog refresh` writes it)"
        )
    elif not o["in_force"]:
        lines.append(f"overlay: {o['path']} is ignored: {o['error']}")
    else:
        counts = ", ".join(f"{k} {v}" for k, v in o["counts"].items())
        stale = f", older than {STALE_DAYS} days: run `envbuild catalog refresh`" if o["stale"] else ""
        lines.append(f"overlay: {o['path']}, refreshed {o['fetched_at']} ({o['age_days']} days old{stale})")
        lines.append(f"  {counts}")
        for index in o["indexes"]:
            lines.append(
                f"  {index['kind']} {index['url']}: "
                + ("read" if index["ok"] else f"not read ({index['error']})")
            )
        lines += [f"  not usable: {u}" for u in o["unusable"]]
        lines += [f"  disagrees with the built-in catalog (built-in kept): {d}" for d in o["disagreements"]]
    lines.append("torch releases (series: patch [torchvision/torchaudio/triton] tier origin):")
    for rel in data["torch"]:
        variants = " ".join(
            v["variant"] + ("?" if v["tier"] == "unconfirmed" else "") for v in rel["variants"]
        )
        lines.append(
            f"  {rel['series']} ({rel['status']}, {rel['origin']}; PyPI default {rel['pypi_default_cuda']}; "
            f"python {' '.join(rel['python'])}; variants {variants})"
        )
        for p in rel["patches"]:
            lines.append(
                f"    {p['version']:<8} [{p['torchvision']}/{p['torchaudio'] or '-'}/{p['triton']}] "
                f"{p['tier']} {p['origin']}"
            )
    lines.append("  (? : variant or arch list unconfirmed)")
    lines.append("Blender versions (series: releases):")
    for s in data["blender"]:
        lines.append(f"  {s['series']} ({s['tier']}): {', '.join(s['releases']) or '(no release list)'}")
    if data["bpy_only_in_overlay"]:
        lines.append(
            f"  bpy on the index, not in the built-in lists: {', '.join(data['bpy_only_in_overlay'])}"
        )
    return "\n".join(lines)
