"""Text a provider decides reaches the renter's terminal and report.md shown, never run (issue 36,
finding 6): ESC sequences (clear screen, window title), rich markup (gloo's ``[enforce fail at
/__w/...]``), bidi overrides and ``<script>`` from a report's first failure, a capture's card name or
driver, a check's output.  Each case failed before its fix (the ESC bytes reached stdout raw, the
``<script>`` reached report.md as HTML), as said at each test; the unit tests pin the rules of
:mod:`envbuild.untrusted`."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_support import check_pytorch as check
from cli_support import envbuild, environ
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.models import CheckSpec
from envbuild.untrusted import markdown, markdown_block, markdown_code, one_line, terminal
from envbuild.validate import run_validation

REAL = Path(__file__).parent / "fixtures" / "smi" / "real"
ESC = "\x1b[2J\x1b]0;pwned\x07"  # clear the screen, set the window's title
GLOO = "[enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] [/bold]"
HOSTILE = f"{ESC}{GLOO} <script>alert(1)</script> \u202eevil"


def _envbuild(*args: str) -> subprocess.CompletedProcess[str]:
    # rich folds nothing: each text whole on its line
    return envbuild(*args, env=environ(COLUMNS="1000"), timeout=300)


def _shown_not_run(text: str) -> None:
    """No control character of the attacker's reached ``text``; its escapes are there to read."""
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in text and "\\u202eevil" in text
    assert "Traceback" not in text and "MarkupError" not in text


# ---- the rules --------------------------------------------------------------------------------------


def test_terminal_shows_every_control_character_as_an_escape() -> None:
    assert terminal("a\x1b[31mb\x07\x7f\x9b\u202e\u2066\u2028\udcff") == (
        "a\\x1b[31mb\\x07\\x7f\\x9b\\u202e\\u2066\\u2028\\udcff"
    )
    assert terminal("one\ntwo\r\n\tx") == "one\\x0atwo\\x0d\\x0a\\x09x"
    assert terminal("one\ntwo\r", multiline=True) == "one\ntwo\\x0d"
    assert terminal(42) == "42" and terminal("plain: é, 中, [x]") == "plain: é, 中, [x]"
    assert one_line("a\nb\r\nc") == "a b c"


def test_markdown_keeps_text_as_text() -> None:
    assert markdown("<script>alert(1)</script>") == "\\<script\\>alert(1)\\</script\\>"
    assert markdown("a | b") == "a \\| b" and markdown("x\ny") == "x y"
    assert markdown("*b* _i_ `c` [l](u) ~~s~~ $m$ \\") == (
        "\\*b\\* \\_i\\_ \\`c\\` \\[l\\](u) \\~\\~s\\~\\~ \\$m\\$ \\\\"
    )
    assert markdown("&lt;x&gt; AT&T") == "\\&lt;x\\&gt; AT&T"  # an entity stays text
    assert markdown("\x1b[2J") == "\\\\x1b\\[2J"
    assert markdown_code("a`b") == "``a`b``" and markdown_code("`x") == "`` `x ``"
    assert markdown_code("a|b", in_table=True) == "`a\\|b`"
    assert markdown_block("x\n```\n\x1b") == ["````", "x\n```\n\\x1b", "````"]


# ---- captures (check --smi) -----------------------------------------------------------------------


def test_a_rocm_smi_card_series_and_driver_are_shown_not_run(tmp_path: Path) -> None:
    """Before: the card's name and the driver reached stdout with their ESC bytes."""
    data = json.loads((REAL / "rocm-smi" / "mi100_rocm602.json").read_text(encoding="utf-8"))
    for key in data:
        if key.startswith("card"):
            data[key]["Card Series"] = f"MI100{HOSTILE}"
    data.setdefault("system", {})["Driver version"] = f"6.2.4{ESC}"
    capture = tmp_path / "rocm-smi.json"
    capture.write_text(json.dumps(data), encoding="utf-8")
    proc = check("--target", "mi300x", "--smi", str(capture))
    assert proc.returncode == 1, proc.stderr
    _shown_not_run(proc.stdout + proc.stderr)
    assert "[enforce fail at /__w/pytorch" in proc.stdout and "<script>" in proc.stdout  # as text


def test_a_plain_nvidia_smi_tables_gpu_name_and_driver_are_shown_not_run(tmp_path: Path) -> None:
    """The name: before, its ESC bytes reached stdout.  The driver: held (a driver that is no version is
    refused with its repr), checked here so it stays so."""
    table = (REAL / "nvidia-smi" / "L4.txt").read_text(encoding="utf-8")
    named = tmp_path / "nvidia-smi-name.txt"
    named.write_text(table.replace("NVIDIA L4      ", f"NVIDIA L4{ESC}\u202eevil", 1), encoding="utf-8")
    proc = check("--smi", str(named))
    assert proc.returncode == 1, proc.stderr
    _shown_not_run(proc.stdout + proc.stderr)
    driver = tmp_path / "nvidia-smi-driver.txt"
    driver.write_text(table.replace("Driver Version: 550.90.07    ", f"Driver Version: 550.90.07{ESC}"))
    proc = check("--smi", str(driver))
    assert proc.returncode == 2 and "\x1b" not in proc.stdout + proc.stderr, proc.stderr


# ---- a run whose first failure is the attacker's text ----------------------------------------------


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real validator run whose pilot check prints the attacker's text and fails: the text is the
    run's first failure (the check's last output line), a stage error and the check's output tail."""
    tmp = tmp_path_factory.mktemp("hostile")
    code = f"import sys; print({HOSTILE!r}); sys.exit(1)"
    lock = cpu_lock(tmp, checks=(CheckSpec(name="pilot", run=("python", "-c", code)),))
    lock_file = tmp / "lock.json"
    lock_file.write_text(to_json(lock), encoding="utf-8")
    report, run_dir = run_validation(lock_file, out=tmp / "runs", stages=["checks"], workdir=tmp)
    assert report.first_failure is not None and "\x1b[2J" in report.first_failure.error
    return run_dir


def test_report_md_shows_the_text_and_holds_no_html(hostile_run: Path) -> None:
    """Before: report.md carried the ESC bytes and a literal <script> (HTML to a Markdown viewer)."""
    md = (hostile_run / "report.md").read_text(encoding="utf-8")
    # a code block or span shows its text as it is: <script> may be there, as text
    prose = re.sub(r"^(`{3,})\n.*?\n\1$", "", md, flags=re.DOTALL | re.MULTILINE)
    outside_code = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", prose)
    assert "<script>" not in outside_code and "\\<script\\>alert(1)\\</script\\>" in md
    _shown_not_run(md)
    first = next(line for line in md.splitlines() if line.startswith("- first failure: "))
    assert "\\[enforce fail at /\\_\\_w/pytorch" in first  # Markdown's own characters escaped too
    (row,) = [line for line in md.splitlines() if line.startswith("| checks | failed |")]
    assert row.count(" | ") == 3, row  # the table keeps its four columns
    ET.fromstring((hostile_run / "junit.xml").read_text(encoding="utf-8"))  # XML 1.0 holds no ESC


def test_report_fleet_prints_the_text_without_running_it(hostile_run: Path, tmp_path: Path) -> None:
    """Before: the first failure reached stdout with its ESC bytes (rich escaped only its markup)."""
    lots = []
    for n in range(3):
        shutil.copytree(hostile_run, tmp_path / f"lot-{n}")
        lots.append(str(tmp_path / f"lot-{n}"))
    proc = _envbuild("report", "fleet", *lots)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    _shown_not_run(proc.stdout + proc.stderr)
    assert "[enforce fail at /__w/pytorch" in proc.stdout and "3 of 3 lots did not pass" in proc.stdout


def test_report_diff_and_verify_show_the_reports_names_not_run(hostile_run: Path, tmp_path: Path) -> None:
    """A package name and a file name from the copied report, on report diff's and verify's lines.
    Before: raw."""
    other = tmp_path / "other"
    shutil.copytree(hostile_run, other)
    data = json.loads((other / "report.json").read_text(encoding="utf-8"))
    data["stages"][0]["stage"] += f"{ESC}\u202eevil"
    (other / "report.json").write_text(json.dumps(data), encoding="utf-8")
    (other / f"notes{ESC}\u202eevil.txt").write_text("added")
    names = sorted(p.name for p in other.iterdir() if p.name != "MANIFEST.sha256")
    sums = "".join(f"{hashlib.sha256((other / n).read_bytes()).hexdigest()}  {n}\n" for n in names)
    (other / "MANIFEST.sha256").write_text(sums, encoding="utf-8")
    (other / f"extra{ESC}\u202eevil").write_text("not listed")
    diff = _envbuild("report", "diff", str(hostile_run), str(other))
    assert diff.returncode == 1, diff.stdout + diff.stderr
    _shown_not_run(diff.stdout + diff.stderr)
    verify = _envbuild("report", "verify", str(other))
    assert verify.returncode == 1
    _shown_not_run(verify.stdout + verify.stderr)


def test_validate_prints_the_first_failure_without_running_it(tmp_path: Path) -> None:
    """The run itself, as `envbuild validate` prints it (gloo's text raised MarkupError in one run)."""
    code = f"import sys; print({HOSTILE!r}); sys.exit(1)"
    lock = cpu_lock(tmp_path, checks=(CheckSpec(name="pilot", run=("python", "-c", code)),))
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(to_json(lock), encoding="utf-8")
    proc = _envbuild(
        "validate", "--lock", str(lock_file), "--stages", "checks", "--out", str(tmp_path / "runs"),
        "--workdir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 1
    _shown_not_run(proc.stdout + proc.stderr)
