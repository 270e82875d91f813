"""Records of images in an engine: an image's files streamed through ``docker save``
(:mod:`envbuild.image.save_stream`), and what went into it (the bundle's lock, the base image)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from envbuild.errors import BuildError
from envbuild.image.record import ImageFiles, Record
from envbuild.image.save_stream import CHUNK, read_saved_image


def image_files(api: Any, image: str) -> tuple[ImageFiles, list[str], str]:
    """``(files, diff_ids, image_id)`` of ``image`` in the engine, streamed through ``docker save``."""
    from docker.errors import APIError, ImageNotFound

    try:
        info = api.inspect_image(image)
        files, diff_ids = read_saved_image(api.get_image(image, chunk_size=CHUNK))
    except ImageNotFound:
        raise BuildError(f"no image {image!r} in the engine") from None
    except APIError as exc:
        raise BuildError(f"the engine failed to export {image!r}: {exc.explanation or exc}") from None
    expected = list(info.get("RootFS", {}).get("Layers", []))
    if expected and expected != diff_ids:
        raise BuildError(
            f"the exported layers of {image!r} do not hash to the engine's DiffIDs "
            f"({len(diff_ids)} read, {len(expected)} expected): the export was damaged"
        )
    return files, diff_ids, str(info["Id"])


def base_inputs(api: Any, base_image: str) -> dict[str, Any]:
    """The base image's id and layer DiffIDs (engine metadata; no export needed)."""
    from docker.errors import APIError, ImageNotFound

    try:
        info = api.inspect_image(base_image)
    except (ImageNotFound, APIError):
        return {"ref": base_image, "id": None, "diff_ids": []}
    return {"ref": base_image, "id": info["Id"], "diff_ids": list(info.get("RootFS", {}).get("Layers", []))}


def lock_inputs(bundle: Path) -> dict[str, Any]:
    """The lock's sha256 and every locked wheel's sha256 (name -> sha256), from ``envbuild.lock.json``."""
    from envbuild.digest import sha256_file
    from envbuild.models import read_lock

    lock_path = bundle / "envbuild.lock.json"
    lock = read_lock(lock_path)
    wheels = sorted({(f.filename, f.sha256) for dist in lock.distributions for f in dist.files})
    return {
        "lock_sha256": sha256_file(lock_path),
        "wheels": [{"file": name, "sha256": sha} for name, sha in wheels],
    }


def record_image(api: Any, image: str, *, bundle: Path | None, base_image: str | None) -> Record:
    """A :class:`Record` of ``image`` (and, given its bundle and base, of what went into it)."""
    from envbuild import __version__

    files, diff_ids, image_id = image_files(api, image)
    inputs: dict[str, Any] = {}
    if bundle is not None:
        inputs.update(lock_inputs(bundle))
    if base_image is not None:
        inputs["base_image"] = base_inputs(api, base_image)
    return Record(
        tag=image,
        image_id=image_id,
        diff_ids=diff_ids,
        files=files,
        inputs=inputs,
        envbuild=__version__,
        built_wheels=built_wheels(bundle, image) if bundle is not None else [],
    )


_BUILT = re.compile(r"^envbuild-built-wheel: ([0-9a-f]{64})  (\S+\.whl)$")


def built_wheels(bundle: Path, tag: str) -> list[dict[str, str]]:
    """The wheels a source build printed in the build log of ``tag`` (``[python] build_from_source``)."""
    from envbuild.image.build import log_path_for

    try:
        text = log_path_for(bundle, tag).read_text(encoding="utf-8")
    except OSError:
        return []
    found = {m.group(2): m.group(1) for line in text.splitlines() if (m := _BUILT.match(line.strip()))}
    return [{"file": name, "sha256": sha} for name, sha in sorted(found.items())]


def record_path_for(bundle: Path, tag: str) -> Path:
    from envbuild.image.refs import slug

    return bundle / f"build-{slug(tag)}.record.json"
