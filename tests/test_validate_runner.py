"""The process runner behind probes and checks, with real processes.

Every test puts a marker string of its own in the argv of the processes it starts and asserts, through
``/proc``, that none of them is left when the run returns, and that the run added no zombie child to
this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.models import CheckSpec
from envbuild.validate import proc_table, run_output
from envbuild.validate.checks import run_checks
from envbuild.validate.probe import run_probe
from envbuild.validate.run_output import MarkerScanner, StreamBuffer
from envbuild.validate.run_tree import kill_current
from envbuild.validate.runner import run_process

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _cmdlines() -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                out[int(name)] = Path(f"/proc/{name}/cmdline").read_bytes()
    return out


def _marked(marker: str) -> list[int]:
    """Live processes whose argv carries ``marker`` (zombies have no cmdline)."""
    return [pid for pid, cmd in _cmdlines().items() if marker.encode() in cmd and pid != os.getpid()]


def _zombie_children() -> set[int]:
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                raw = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            fields = raw[raw.rfind(b")") + 2 :].split()
            if fields[0] == b"Z" and int(fields[1]) == os.getpid():
                found.add(int(name))
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    """A marker for this test's processes; whatever carries it is killed afterwards, pass or fail."""
    tag = f"envbuild-runner-test-{uuid.uuid4().hex}"
    zombies = _zombie_children()
    yield tag
    left = _marked(tag)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    assert left == [], f"processes left behind: {left}"
    assert _zombie_children() - zombies == set(), "zombie children left behind"


def _py(code: str, tag: str) -> list[str]:
    """``python -c code`` with the marker in its argv (a comment line)."""
    return [PY, "-c", f"# {tag}\n" + textwrap.dedent(code)]


def _daemon_code(tag: str, then: str) -> str:
    """Double fork + setsid: a grandchild in its own session, holding stdout/stderr, then ``then``."""
    return textwrap.dedent(
        f"""
        import os, sys, time
        middle = os.fork()
        if middle == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{tag}"])
            os._exit(0)
        os.waitpid(middle, 0)  # the daemon exists now, re-parented
        print("parent", flush=True)
        {then}
        """
    )


def test_grandchild_daemon_holding_stdout_does_not_block_a_timeout(marker: str) -> None:
    check = CheckSpec(
        name="daemon", run=tuple(_py(_daemon_code(marker, "time.sleep(600)"), marker)), timeout_s=2
    )
    start = time.monotonic()
    res = run_checks((check,), Path.cwd())
    took = time.monotonic() - start
    assert took < 2 + 3, took  # was: as long as the daemon lived
    assert res.status == "timed_out"
    (entry,) = res.facts["checks"]
    assert entry["error"] == "did not finish within 2 s; killed"
    assert entry["stragglers_killed"] == 1 and entry["killed_via"] == "subreaper"
    assert entry["output_tail"].strip() == "parent"
    assert _marked(marker) == []


def test_check_that_closes_its_output_and_keeps_running(marker: str) -> None:
    code = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(600)\n"
    start = time.monotonic()
    res = run_process(_py(code, marker), timeout_s=2)
    assert time.monotonic() - start < 2 + 3
    assert res.timed_out and res.returncode == -9
    assert res.stragglers_killed == 0 and not res.pipes_cut
    assert _marked(marker) == []


def test_many_children_some_in_their_own_session_all_die(
    marker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = f"""
        import subprocess, sys, time
        for i in range(50):
            argv = [sys.executable, "-c", "import time; time.sleep(600)", "{marker}"]
            subprocess.Popen(argv, start_new_session=i % 2 == 0)
        print("ENVBUILD-RESULT {{}}", flush=True)
        time.sleep(600)
    """
    script = tmp_path / "probe_many.py"
    script.write_text(f"# {marker}\n" + textwrap.dedent(code), encoding="utf-8")
    monkeypatch.setenv("ENVBUILD_PROBE_MANY", str(script))
    start = time.monotonic()
    out = run_probe(PY, "many", {}, 3)
    assert time.monotonic() - start < 3 + 3
    assert out.outcome == "timed_out"
    assert out.reason == "probe 'many' did not finish within 3 s; killed with every process it started"
    assert out.facts["stragglers_killed"] == 50 and out.facts["killed_via"] == "subreaper"
    assert _marked(marker) == []


def test_exit_zero_leaving_a_setsid_daemon_kills_and_reports_it(marker: str) -> None:
    check = CheckSpec(name="leaves", run=tuple(_py(_daemon_code(marker, "sys.exit(0)"), marker)))
    start = time.monotonic()
    res = run_checks((check,), Path.cwd())
    assert time.monotonic() - start < 3
    assert res.status == "passed", res.error  # a straggler is a fact, not a failure by itself
    (entry,) = res.facts["checks"]
    assert entry["returncode"] == 0 and entry["stragglers_killed"] == 1
    assert entry["killed_via"] == "subreaper" and entry["output_dropped_bytes"] == 0
    assert _marked(marker) == []


def test_300_mb_of_output_keeps_memory_flat() -> None:
    """In a fresh interpreter, so that its peak RSS is the runner's alone."""
    writer = (
        "import sys\n"
        "sys.stdin.read()\n"
        "chunk = (b'x' * 1023 + b'\\n') * 1024\n"
        "for _ in range(300):\n"
        "    sys.stdout.buffer.write(chunk)\n"
        "sys.stdout.buffer.write(b'ENVBUILD-RESULT {\"ok\": 1}\\n')\n"
    )
    driver = textwrap.dedent(
        f"""
        import json, os, sys
        from envbuild.validate.runner import run_process

        def hwm_kib():
            # VmHWM: this process image's peak RSS. Not getrusage's ru_maxrss, which Linux carries over
            # exec from the forking parent (pytest, hundreds of MiB late in a full run).
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])

        from envbuild.validate.probe import run_probe
        res = run_process([sys.executable, "-c", {writer!r}], timeout_s=60, stdin=b"{{}}",
                          marker=b"ENVBUILD-RESULT ")
        open("probe.py", "w").write({writer!r})
        os.environ["ENVBUILD_PROBE_BIG"] = "probe.py"
        probe = run_probe(sys.executable, "big", {{}}, 60)
        print(json.dumps({{
            "rss_kib": hwm_kib(),
            "tail": len(res.stdout.tail), "dropped": res.stdout.dropped, "total": res.stdout.total,
            "line": res.marker_line.decode(), "facts": res.facts(),
            "probe": [probe.outcome, probe.data, probe.facts, len(probe.stdout_tail)],
        }}))
        """
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [PY, "-c", driver],
            capture_output=True,
            text=True,
            cwd=tmp,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=120,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    size = 300 * 1024 * 1024 + len('ENVBUILD-RESULT {"ok": 1}\n')
    assert got["rss_kib"] < 150 * 1024, got["rss_kib"]
    assert got["total"] == size
    assert run_output.TAIL_BYTES - run_output.FIRST_WORD_MAX <= got["tail"] <= run_output.TAIL_BYTES
    assert got["dropped"] == size - got["tail"]
    assert got["facts"]["stdout_dropped_bytes"] == got["dropped"]
    assert got["line"] == 'ENVBUILD-RESULT {"ok": 1}'
    outcome, data, facts, tail_chars = got["probe"]
    assert outcome == "ok" and data == {"ok": 1}
    assert facts["stdout_dropped_bytes"] == got["dropped"] and tail_chars == 2000


def test_kill_current_stops_the_whole_tree(marker: str) -> None:
    code = _daemon_code(marker, "time.sleep(600)")
    timer = threading.Timer(1.0, kill_current)
    timer.start()
    try:
        start = time.monotonic()
        res = run_process(_py(code, marker), timeout_s=60)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 1 + 3
    assert res.interrupted and not res.timed_out and res.returncode == -9
    assert res.stragglers_killed == 1  # the daemon, which had left the process group
    assert _marked(marker) == []


def test_without_a_subreaper_the_pipes_are_still_closed_in_bounded_time(
    marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no subreaper can be set, a daemon out of the group survives, but does not block the run."""
    monkeypatch.setattr(proc_table.Subreaper, "_available", False)
    start = time.monotonic()
    res = run_process(_py(_daemon_code(marker, "time.sleep(600)"), marker), timeout_s=1, drain_s=1)
    assert time.monotonic() - start < 1 + 1 + 2
    assert res.timed_out and res.killed_via == "group" and res.pipes_cut
    assert res.facts()["pipes_closed_after_drain"] is True
    survivors = _marked(marker)
    assert len(survivors) == 1  # the daemon: the fixture kills it
    for pid in survivors:
        os.kill(pid, 9)
    deadline = time.monotonic() + 5
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_the_subreaper_is_restored_after_a_run(marker: str) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    value = ctypes.c_int(-1)
    res = run_process(_py("print('hi')", marker), timeout_s=10)
    assert res.returncode == 0 and res.stdout.tail == b"hi\n"
    assert libc.prctl(proc_table.PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) == 0
    assert value.value == 0


def test_stdin_env_cwd_and_separate_streams(tmp_path: Path) -> None:
    code = (
        "import os, sys; data = sys.stdin.read();"
        "print(len(data), os.environ['ENVBUILD_RUNNER_T'], os.getcwd());"
        "print('err', file=sys.stderr)"
    )
    big = b"y" * (1 << 20)  # more than a pipe holds: written as the program reads
    res = run_process(
        [PY, "-c", code], timeout_s=20, stdin=big, env={**os.environ, "ENVBUILD_RUNNER_T": "v"}, cwd=tmp_path
    )
    assert res.returncode == 0
    assert res.stdout.tail.decode() == f"{1 << 20} v {tmp_path}\n"
    assert res.stderr.tail == b"err\n"
    assert res.facts() == {"stdout_dropped_bytes": 0, "stderr_dropped_bytes": 0, "stragglers_killed": 0}


def test_a_program_that_cannot_start_raises_oserror() -> None:
    with pytest.raises(FileNotFoundError):
        run_process(["/no/such/program-envbuild"], timeout_s=5)


def _naive_last_marker_line(data: bytes, marker: bytes, limit: int) -> tuple[bytes | None, bool]:
    line: bytes | None = None
    overflow = False
    for ln in data.split(b"\n"):
        if ln.startswith(marker):
            line, overflow = (None, True) if len(ln) > limit else (ln, False)
    return line, overflow


@pytest.mark.parametrize("seed", range(20))
def test_marker_scanner_matches_a_whole_read_under_any_split(seed: int) -> None:
    rnd = random.Random(seed)
    pieces = [b"ENVBUILD-RESULT {}", b"ENVBUILD-RES", b"EN", b"E", b"", b"xENVBUILD-RESULT 1", b"noise " * 5]
    pieces += [b"ENVBUILD-RESULT " + b"z" * rnd.randrange(0, 90), b"\xff\xfe"]
    data = b"\n".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 40)))
    if rnd.random() < 0.5:
        data += b"\n"
    scanner = MarkerScanner(b"ENVBUILD-RESULT ", limit=60)
    pos = 0
    while pos < len(data):
        step = rnd.randrange(1, 12)
        scanner.feed(data[pos : pos + step])
        pos += step
    scanner.close()
    assert (scanner.line, scanner.overflow) == _naive_last_marker_line(data, b"ENVBUILD-RESULT ", 60)


def test_stream_buffer_keeps_head_and_tail_and_counts_the_rest() -> None:
    buf = StreamBuffer(tail_max=10, head_max=4)
    for part in (b"abc", b"defghijklmnop", b"", b"q", b"01234567 9ABCDEF"):
        buf.feed(part)
    # the last 10 bytes are "67 9ABCDEF": "67" may be the end of a token cut in half, so it goes too
    assert buf.head == b"abcd" and buf.tail == b"9ABCDEF"
    assert buf.total == 33 and buf.dropped == 26
    whole = StreamBuffer(tail_max=10)
    whole.feed(b"short 1234")
    assert whole.tail == b"short 1234" and whole.dropped == 0  # nothing cut: nothing dropped


def test_checks_take_an_environment_whose_path_finds_argv0(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "pilot-envbuild-runner"
    tool.write_text(f"#!{PY}\nimport os\nprint(os.environ['ENVBUILD_RUNNER_T'])\n", encoding="utf-8")
    tool.chmod(0o755)
    check = CheckSpec(name="env", run=("pilot-envbuild-runner",))
    res = run_checks((check,), tmp_path, env={"PATH": str(bindir), "ENVBUILD_RUNNER_T": "from-env"})
    assert res.status == "passed", res.error
    assert res.facts["checks"][0]["output_tail"] == "from-env\n"
    assert run_checks((check,), tmp_path).status == "failed"  # not on the validator's own PATH
