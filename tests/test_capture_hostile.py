"""Captures an attacker writes (issue 36, finding 8): ``check --smi`` on them ends in a capture error
(exit 2, the file named), never a traceback.  Each case failed before its fix, as said at each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import check_pytorch as check

from envbuild.errors import CaptureError
from envbuild.hardware.captures import parse_capture

FIXTURES = Path(__file__).parent / "fixtures" / "smi"


@pytest.mark.parametrize("text", ["[" * 100000, '{"card0": ' * 100000])
def test_deeply_nested_json_is_a_capture_error(tmp_path: Path, text: str) -> None:
    """Before: json.loads raised RecursionError, a traceback and exit 1."""
    capture = tmp_path / "capture.json"
    capture.write_text(text, encoding="utf-8")
    proc = check("--smi", str(capture))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    assert f"envbuild: error: {capture}: `amd-smi / rocm-smi --json` capture nested too deeply" in proc.stderr


def test_deeply_nested_xml_is_read_without_a_traceback(tmp_path: Path) -> None:
    """Held before (expat does not recurse): a million nested elements inside a <gpu>, and the same
    left unclosed."""
    depth = 1_000_000
    whole = tmp_path / "whole.xml"
    whole.write_text(
        "<nvidia_smi_log><gpu id='1'>" + "<a>" * depth + "</a>" * depth + "</gpu></nvidia_smi_log>",
        encoding="utf-8",
    )
    cut = tmp_path / "cut.xml"
    cut.write_text("<nvidia_smi_log><gpu id='1'>" + "<a>" * depth, encoding="utf-8")
    for capture, code in ((whole, 0), (cut, 2)):  # whole: read, nothing in it to judge
        proc = check("--smi", str(capture))
        assert proc.returncode == code and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        if capture == cut:
            assert "truncated `nvidia-smi -q -x` capture" in proc.stderr


def test_an_amd_smi_capture_of_the_wrong_shape_is_a_capture_error() -> None:
    """Before: a value where amd-smi prints an object (``"asic": 5``) raised AttributeError out of the
    reader (found by mutating the MI300X capture)."""
    entries = json.loads((FIXTURES / "amd-smi-static-mi300x.json").read_text(encoding="utf-8"))
    entries[0]["asic"] = 5
    expected = r"amd\.json: unreadable `amd-smi --json` capture \(AttributeError"
    with pytest.raises(CaptureError, match=expected):
        parse_capture(json.dumps(entries), "amd.json")
