"""Live facts without a GPU here: NVML does not initialise, so nvidia-smi -q -x answers (a script on PATH
that prints a real capture, run as a real subprocess)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from envbuild.hardware import live
from envbuild.hardware.tools import TAIL_CHARS, run_tool

CAPTURE = Path(__file__).parent / "fixtures" / "smi" / "real" / "nvidia-smi-q-x" / "tesla-t4.xml"


def test_nvidia_smi_answers_when_nvml_does_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f'#!/bin/sh\n[ "$1 $2" = "-q -x" ] && exec cat {CAPTURE}\nexit 9\n', encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(live, "nvml_facts", lambda: None)  # as on a machine without libnvidia-ml.so.1
    got = live.nvidia_facts()
    assert got is not None
    assert (got.source, got.path, got.devices[0].name) == ("nvidia-smi -q -x", "nvidia-smi -q -x", "Tesla T4")


def test_no_vendor_tool_is_no_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert live.amd_facts() is None
    assert live.nvml_facts() is None  # pynvml imports; nvmlInit fails without a driver


def test_the_host_stage_driver_reads_nvml_through_nvidia_ml_py() -> None:
    """validate/host.py's driver fact uses the same binding; without a driver it is (None, None), and
    nothing is left initialised (a second call behaves the same)."""
    from envbuild.validate.host import nvml_driver

    assert nvml_driver() == (None, None)
    assert nvml_driver() == (None, None)


def test_the_loaded_library_is_read_from_the_process_maps(tmp_path: Path) -> None:
    """Provenance names the libnvidia-ml.so.1 the process mapped: a driver's versioned file, or a
    stand-in's path (tests/test_hardware_nvml.py reads the stand-in's through NVML)."""
    maps = tmp_path / "maps"
    maps.write_text(
        "7f0000000000-7f0000001000 r--p 00000000 00:00 0          [heap]\n"
        "7f1000000000-7f1000100000 r-xp 00000000 08:01 123  "
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20\n",
        encoding="utf-8",
    )
    assert live.loaded_library(maps) == "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20"
    maps.write_text("7f0000000000-7f0000001000 r--p 00000000 00:00 0          [heap]\n", encoding="utf-8")
    assert live.loaded_library(maps) is None
    assert live.loaded_library(tmp_path / "absent") is None


def test_the_binding_is_named_by_its_distribution() -> None:
    from importlib.metadata import version

    import pynvml

    assert live.binding_name(pynvml) == f"nvidia-ml-py {version('nvidia-ml-py')}"
    other = type("Module", (), {"__file__": "/elsewhere/pynvml.py"})()
    assert live.binding_name(other).startswith("pynvml from /elsewhere/pynvml.py (not nvidia-ml-py ")


def test_amd_smi_static_and_metric_are_read_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`amd-smi static` holds the identity and the maximum link, `amd-smi metric` the use, the memory in
    use, the current link and the ECC counts: both are read, so an MI300X is judged under load.  The two
    documents are transcribed (tests/fixtures/smi/README.md), served by a script named amd-smi on PATH."""
    smi = Path(__file__).parent / "fixtures" / "smi"
    tool = tmp_path / "amd-smi"
    tool.write_text(
        "#!/bin/sh\n"
        f'[ "$1 $2" = "static --json" ] && exec cat {smi / "amd-smi-static-mi300x.json"}\n'
        f'[ "$1 $2" = "metric --json" ] && exec cat {smi / "amd-smi-metric-mi300x.json"}\n'
        "exit 2\n",
        encoding="utf-8",
    )
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    got = live.amd_facts()
    assert got is not None
    (dev,) = got.devices
    assert (dev.name, dev.arch, dev.pcie.gen_max, dev.power_limit_w) == (
        "AMD Instinct MI300X",
        "gfx942",
        5,
        750,
    )
    assert (dev.utilization_gpu_pct, dev.pcie.gen_current, dev.ecc.volatile_correctable) == (100, 4, 3)
    assert dev.memory_used_mib is not None and dev.memory_used_mib > 170_000

    from envbuild.catalog import load_catalog
    from envbuild.hardware.rules import Order, judge

    catalog = load_catalog()
    mi300x = catalog.card("mi300x")
    assert mi300x is not None
    codes = [f.code for f in judge(got, Order(targets=(mi300x,)), catalog)]
    assert "W-HW-PCIE-GEN" in codes  # gen 4 of 5 under load: judged only because metric was read


# ---- the one vendor-tool runner (envbuild.hardware.tools), live.py's and validate/host.py's -------------
# The tools below are hand-written stand-ins: small shell scripts on PATH in tmp_path, run as real
# subprocesses, that behave as a missing, failing, hanging or garbling vendor tool would.


DRIVER_DOWN = "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."


def stand_in(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def test_a_missing_tool_is_not_found_and_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    got = run_tool(["nvidia-smi", "-q", "-x"])
    assert (got.status, got.output, got.error, got.ok) == ("not found", None, None, False)


def test_a_tool_that_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in(tmp_path, "amd-smi", 'printf "%s\\n" "$*"\nprintf "noise\\n" >&2\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    got = run_tool(["amd-smi", "static", "--json"])
    assert (got.status, got.output, got.returncode, got.error) == ("ok", "static --json\n", 0, None)
    assert got.command == "amd-smi static --json"


def test_a_non_zero_exit_names_the_command_and_the_last_line_of_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in(
        tmp_path,
        "nvidia-smi",
        f'echo "partial output"\nprintf "first\\n{DRIVER_DOWN}\\n\\n" >&2\nexit 9\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    got = run_tool(["nvidia-smi", "-q", "-x"])
    assert (got.status, got.output, got.returncode) == ("failed", None, 9)
    assert got.error == f"nvidia-smi -q -x exited 9: {DRIVER_DOWN}"
    stand_in(tmp_path, "rocm-smi", "exit 3\n")  # nothing printed: the exit alone
    assert run_tool(["rocm-smi", "--json"]).error == "rocm-smi --json exited 3"


def test_a_long_tail_is_cut_and_stdout_answers_when_stderr_is_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in(tmp_path, "rocm-smi", f'echo "{"x" * 1000}"\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    error = run_tool(["rocm-smi"]).error
    assert error is not None and error.startswith("rocm-smi exited 1: xxx") and error.endswith("...")
    assert len(error) == len("rocm-smi exited 1: ") + TAIL_CHARS


def test_output_that_is_not_utf8_is_read_with_replacements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in(tmp_path, "nvidia-smi", "printf 'Tesla \\377\\376 T4\\n'\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    got = run_tool(["nvidia-smi"])
    assert got.output == "Tesla \ufffd\ufffd T4\n"


def _gone(pid: int) -> bool:
    """The process has ended: absent, or a zombie no one has reaped yet (PID 1 in a container may not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_a_hanging_tool_is_killed_with_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in starts a child that would outlive it (holding the output pipe) and hangs; the
    runner gives up at its timeout and kills the tool's whole process group."""
    child = tmp_path / "child.pid"
    stand_in(tmp_path / "bin", "nvidia-smi", f"sleep 60 &\necho $! > {child}\nwait\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    got = run_tool(["nvidia-smi", "-q", "-x"], timeout_s=1)
    assert time.monotonic() - started < 10
    assert (got.status, got.output, got.returncode) == ("timed out", None, None)
    assert got.error == "nvidia-smi -q -x did not answer within 1 s"
    pid = int(child.read_text(encoding="ascii"))
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def test_a_tool_that_cannot_start_is_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = stand_in(tmp_path, "amd-smi", "")
    tool.write_bytes(b"\x7fELF not really")  # executable, but no interpreter can run it
    monkeypatch.setenv("PATH", str(tmp_path))
    got = run_tool(["amd-smi", "static", "--json"])
    assert got.status == "failed" and got.returncode is None
    assert got.error is not None and got.error.startswith("amd-smi static --json: ")


def test_the_validators_tool_facts_use_the_runner_and_keep_the_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """validate/host.py: the CSV query answers (a recorded H100 pair), ``-q -x`` fails, and AMD's tools
    are absent: one reading, its raw output, and the failure named with the driver's last line."""
    from envbuild.validate.host import collect_gpu_tools

    csv = Path(__file__).parent / "fixtures" / "smi" / "nvidia-smi-query-gpu-h100x2.csv"
    stand_in(
        tmp_path,
        "nvidia-smi",
        f'case "$1" in --query-gpu=*) exec cat {csv};; esac\n'
        'echo "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error" >&2\nexit 15\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setattr("envbuild.validate.host.nvml_driver", lambda: (None, None))
    got = collect_gpu_tools()
    (reading,) = got.readings
    assert (reading.source, reading.driver_version, len(reading.devices)) == (
        "nvidia-smi --query-gpu",
        "570.124.06",
        2,
    )
    assert reading.devices[0].arch == "sm_90"
    assert sorted(got.raw) == ["nvidia-smi-query.csv"]
    assert got.errors == [
        "nvidia-smi -q -x exited 15: Unable to determine the device handle for GPU0000:18:00.0: Unknown Error"
    ]


def test_unreadable_output_is_an_error_naming_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in(tmp_path, "rocm-smi", "echo '[]'\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setattr("envbuild.validate.host.nvml_driver", lambda: (None, None))
    from envbuild.validate.host import collect_gpu_tools

    got = collect_gpu_tools()
    assert got.readings == [] and got.raw == {"rocm-smi.json": "[]\n"}
    (error,) = got.errors
    assert error.startswith("rocm-smi --showproductname --showdriverversion --json: ")
    assert "expected an object" in error
