"""Read a capture file (``check --smi FILE``): the format is told by the content, never by the name.

A name that says another tool than the content (``rocm-smi.json`` holding ``nvidia-smi -q -x``) is
refused, as is an empty, truncated or unrecognised file; each error names the file and the formats
accepted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from envbuild.errors import CaptureError
from envbuild.hardware.amd import amd_smi_entries, is_rocm_smi, load_json, parse_amd_smi, parse_rocm_smi
from envbuild.hardware.nvidia_query import QUERY, is_query_gpu, parse_query_gpu
from envbuild.hardware.nvidia_table import is_table, parse_nvidia_table
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.models.hardware import HardwareFacts

ACCEPTED = (
    "`nvidia-smi -q -x` (XML)",
    "the plain `nvidia-smi` screen",
    f"`{' '.join(QUERY)}`",
    "`amd-smi static --json` / `amd-smi metric --json`",
    "`rocm-smi ... --json`",
)
MAX_BYTES = 32 * 2**20  # the largest real capture (8 GPUs, every clock listed) is under 1 MiB
# A tool's name in a file name, and the sources (HardwareFacts.source) that tool prints.
_NAMED_TOOL: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (re.compile(r"rocm[-_]?smi", re.I), "rocm-smi", ("rocm-smi",)),
    (re.compile(r"amd[-_]?smi", re.I), "amd-smi", ("amd-smi",)),
    (
        re.compile(r"nvidia[-_]?smi|nvsmi", re.I),
        "nvidia-smi",
        ("nvidia-smi -q -x", "nvidia-smi table", "nvidia-smi --query-gpu"),
    ),
)
_SUFFIX = {
    ".xml": ("nvidia-smi -q -x",),
    ".json": ("amd-smi", "rocm-smi"),
    ".csv": ("nvidia-smi --query-gpu",),
}


def accepted() -> str:
    return "; ".join(ACCEPTED)


def _sniff(text: str, path: str) -> Callable[[str, str | None], HardwareFacts]:
    head = text.lstrip("\ufeff \t\r\n")
    if not head:
        raise CaptureError(f"{path}: empty capture; accepted formats: {accepted()}")
    if head.startswith("<"):
        return parse_nvidia_xml
    if head.startswith(("{", "[")):
        data = load_json(text, path, "amd-smi / rocm-smi --json")
        if is_rocm_smi(data):
            return parse_rocm_smi
        if amd_smi_entries(data) is not None:
            return parse_amd_smi
        raise CaptureError(
            f"{path}: JSON, but not an amd-smi or rocm-smi capture; accepted formats: {accepted()}"
        )
    if is_table(text):
        return parse_nvidia_table
    if is_query_gpu(text):
        return parse_query_gpu
    raise CaptureError(f"{path}: not the output of a supported tool; accepted formats: {accepted()}")


def _check_name(facts: HardwareFacts, path: str) -> None:
    name = Path(path).name
    for pattern, tool, sources in _NAMED_TOOL:
        if pattern.search(name) and facts.source not in sources:
            raise CaptureError(
                f"{path}: the name says {tool}, but the content is `{facts.source}` output; "
                "rename the file or give the capture its tool made"
            )
    expected = _SUFFIX.get(Path(path).suffix.lower())
    if expected and facts.source not in expected:
        raise CaptureError(f"{path}: a {Path(path).suffix} file holding `{facts.source}` output")


def parse_capture(text: str, path: str) -> HardwareFacts:
    facts = _sniff(text, path)(text, path)
    _check_name(facts, path)
    return facts


def read_capture(path: str | Path) -> HardwareFacts:
    """The facts in one capture file, or a :class:`CaptureError` naming it."""
    name = str(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise CaptureError(f"{name}: cannot read the capture: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise CaptureError(f"{name}: over {MAX_BYTES // 2**20} MiB: not a vendor tool's capture")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CaptureError(f"{name}: not text (UTF-8); accepted formats: {accepted()}") from None
    return parse_capture(text, name)
