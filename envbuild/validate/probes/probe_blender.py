# mypy: disable-error-code="import-not-found,import-untyped,no-untyped-call"
"""Probe: Blender itself: its version, Cycles' devices per type, and one fixed render per device.

One script, two ways to run it (the same scene, the same settings, the same result line):

- inside the Blender binary (``blender.source = "official"``)::

      blender --background --factory-startup --python-exit-code 3 --python probe_blender.py -- '<json>'

  (the arguments are the JSON object after ``--``);
- through ``import bpy`` in the interpreter under test (``blender.source = "pypi"``)::

      python probe_blender.py          # the JSON arguments on stdin

Arguments: ``devices`` (the Cycles device types to render on: CPU, CUDA, OPTIX, HIP, ONEAPI; the CPU
renders first in any case, as the reference), ``out_dir`` (where the PNGs go), ``size`` (pixels per
side), ``samples``, ``seed``.  The scene is Blender's factory startup scene (cube, light, camera) with
fixed settings: no denoising (the CPU and GPU denoisers differ), no adaptive sampling, a fixed seed, the
"Standard" view transform.  For every render the probe reports its seconds, the PNG and the mean and
standard deviation of its RGB values, and for a GPU render the PSNR against the CPU render.

Standard library and Blender only: never envbuild.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

MARKER = "ENVBUILD-RESULT "
GPU_TYPES = ("CUDA", "OPTIX", "HIP", "ONEAPI")
# _cycles.get_device_types() answers one flag per compiled-in backend, in this order (Blender 3.6+).
COMPILED_ORDER = ("CUDA", "OPTIX", "HIP", "METAL", "ONEAPI", "HIPRT")


def read_args() -> dict[str, Any]:
    if "--" in sys.argv:  # inside the Blender binary: blender ... --python probe_blender.py -- '<json>'
        rest = sys.argv[sys.argv.index("--") + 1 :]
        return json.loads(rest[0]) if rest else {}
    raw = sys.stdin.read()
    return json.loads(raw) if raw.strip() else {}


def emit(result: dict[str, Any]) -> None:
    sys.stdout.flush()
    sys.stdout.write("\n" + MARKER + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


def error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:500]


def pixels(bpy: Any, path: str) -> list[float]:
    """The RGB values of a PNG, 0..1, row by row (alpha dropped)."""
    image = bpy.data.images.load(path, check_existing=False)
    try:
        values = list(image.pixels[:])
    finally:
        bpy.data.images.remove(image)
    return [v for i, v in enumerate(values) if i % 4 != 3]


def stats(values: list[float]) -> dict[str, float]:
    n = len(values) or 1
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / n
    return {"mean": round(mean, 5), "std": round(math.sqrt(var), 5)}


def psnr(a: list[float], b: list[float]) -> float | None:
    """Peak signal-to-noise ratio in dB (peak 1.0); None when the sizes differ, inf when identical."""
    if len(a) != len(b) or not a:
        return None
    mse = sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) / len(a)
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def main() -> None:
    args = read_args()
    started = time.monotonic()
    import bpy

    import_s = time.monotonic() - started
    result: dict[str, Any] = {
        # the Blender binary knows its own path; the bpy module has none
        "mode": "binary" if bpy.app.binary_path else "module",
        "executable": sys.executable,
        "binary_path": bpy.app.binary_path,
        "version": ".".join(str(p) for p in bpy.app.version),
        "version_string": bpy.app.version_string,
        "build_hash": bpy.app.build_hash.decode("ascii", "replace")
        if isinstance(bpy.app.build_hash, bytes)
        else str(bpy.app.build_hash),
        "background": bool(bpy.app.background),
        "import_s": round(import_s, 3),
    }
    bpy.ops.wm.read_factory_settings(use_empty=False)
    import _cycles

    flags = tuple(_cycles.get_device_types())
    compiled = {name: bool(flag) for name, flag in zip(COMPILED_ORDER, flags, strict=False)}
    result["compiled"] = {t: compiled.get(t, False) for t in GPU_TYPES}
    devices: dict[str, list[dict[str, str]]] = {"CPU": []}
    errors: dict[str, str] = {}
    for kind in ("CPU", *GPU_TYPES):
        if kind != "CPU" and not compiled.get(kind, False):
            devices[kind] = []
            continue
        try:
            found = _cycles.available_devices(kind)
        except Exception as exc:  # a driver library that refuses to load
            errors[kind] = error_text(exc)
            devices[kind] = []
            continue
        devices[kind] = [
            {"name": str(d[0]), "type": str(d[1]), "id": str(d[2])} for d in found if d[1] == kind
        ]
    result["devices"] = devices
    result["device_errors"] = errors

    scene = bpy.context.scene
    scene.render.engine = "CYCLES"
    size, samples, seed = int(args.get("size", 64)), int(args.get("samples", 16)), int(args.get("seed", 0))
    scene.render.resolution_x = scene.render.resolution_y = size
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = "PNG"
    scene.render.image_settings.color_mode = "RGB"
    scene.render.image_settings.color_depth = "8"
    scene.view_settings.view_transform = "Standard"
    cycles = scene.cycles
    cycles.samples = samples
    cycles.seed = seed
    cycles.use_animated_seed = False
    cycles.use_denoising = False
    cycles.use_adaptive_sampling = False
    result["scene"] = {"size": size, "samples": samples, "seed": seed, "objects": len(scene.objects)}

    prefs = bpy.context.preferences.addons["cycles"].preferences
    out_dir = str(args.get("out_dir") or ".")
    wanted = [d for d in args.get("devices", ["CPU"]) if d != "CPU"]
    renders: list[dict[str, Any]] = []
    reference: list[float] | None = None
    for kind in ["CPU", *wanted]:
        entry: dict[str, Any] = {"device": kind}
        renders.append(entry)
        if kind != "CPU" and not devices.get(kind):
            entry["status"] = "unavailable"
            continue
        try:
            if kind == "CPU":
                cycles.device = "CPU"
            else:
                prefs.compute_device_type = kind
                prefs.get_devices_for_type(kind)  # fills prefs.devices
                for dev in prefs.devices:
                    dev.use = dev.type == kind
                cycles.device = "GPU"
                entry["used"] = [dev.name for dev in prefs.devices if dev.use]
            path = os.path.join(out_dir, f"blender-{kind.lower()}.png")
            scene.render.filepath = path
            t0 = time.monotonic()
            bpy.ops.render.render(write_still=True)
            entry["render_s"] = round(time.monotonic() - t0, 3)
            entry["png"] = path
            values = pixels(bpy, path)
            entry.update(stats(values))
            if kind == "CPU":
                reference = values
            elif reference is not None:
                value = psnr(reference, values)
                entry["psnr_db"] = (
                    None if value is None else ("inf" if math.isinf(value) else round(value, 2))
                )
            entry["status"] = "rendered"
        except Exception as exc:
            entry["status"] = "error"
            entry["error"] = error_text(exc)
    result["renders"] = renders
    emit(result)


main()
