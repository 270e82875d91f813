"""NVML driven through the real nvidia-ml-py, against a stand-in libnvidia-ml.so.1 (issue 34).

tests/nvml_stub/nvml_stub.c is built here with gcc against NVIDIA's own nvml.h and answers what a real
capture of ``nvidia-smi -q -x`` (tests/fixtures/smi/real/nvidia-smi-q-x, see SOURCES.md) shows, read by
tests/nvml_stand_in.py's own reader, not by envbuild's parser.  envbuild runs against it in a fresh
interpreter per state, so the binding loads the stub by its bare name as it loads a driver's library.

The states, each from a real capture; what a capture lacks is derived, and says so:

- healthy data-centre card: a100-sxm4-v12.xml, derived: MIG disabled, no MIG instances (printed as
  nvidia-smi prints none in a10g.xml), utilization 0 %;
- MIG enabled: a100-sxm4-v12.xml as captured (4 instances);
- GeForce: rtx-3060-v12.xml as captured; every query the capture prints N/A for answers NOT_SUPPORTED;
- older driver: tesla-t4.xml (driver 515.105.01) through a library without the entry points that came
  with R535 (the clock event reasons' name, the fabric calls); derived from it, a library before R510,
  without the _v3 process calls;
- throttled under load: rtx-3080-v13.xml (65 % busy), derived: HW and SW thermal slowdown active and
  the SM clock at 1200 of 2100 MHz;
- other processes present: rtx-4000-sff-ada-v13.xml as captured (two graphics, one compute, one both);
- a lent H200: h200-580.159.04.xml as envbuild captured it (SOURCES.md), checked against what the
  real NVML answered on that machine (tests/fixtures/smi/real/nvml/);
- NVML failing to initialise, or failing early (the driver version, the device count, a handle): the
  capture through an ``nvidia-smi`` on PATH instead.

The A100 states add one fact no capture carries, derived from NVIDIA's A100 datasheet: 12 NVLink links,
all up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from conftest import once_per_run
from nvml_stand_in import LIBRARIES, build, run_envbuild, state_from_capture

from envbuild.catalog import load_catalog
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.hardware.rules import Order, judge_rules
from envbuild.models.hardware import NOT_APPLICABLE, DeviceFacts, HardwareFacts

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "smi" / "real" / "nvidia-smi-q-x"
A100_NVLINK = {"0.nvlink": ",".join(["1"] * 12)}  # derived: NVIDIA A100 datasheet, 12 NVLink links


@dataclass(frozen=True)
class State:
    capture: str
    derive: tuple[tuple[str, str], ...] = ()  # edits of the capture (both readers see them)
    stub: dict[str, str | int | None] = field(default_factory=dict)  # facts only NVML carries
    hide: str = "full"  # the library: "full", "before-r535", "before-r510"
    targets: tuple[str, ...] = ()

    def xml(self) -> str:
        text = (REAL / self.capture).read_text(encoding="utf-8")
        for old, new in self.derive:  # "(?s)...": a pattern
            pattern = old.startswith("(?s)")
            assert re.search(old, text) if pattern else old in text, old
            text = re.sub(old, new, text) if pattern else text.replace(old, new)
        return text


STATES = {
    "healthy": State(
        "a100-sxm4-v12.xml",
        derive=(
            ("<current_mig>Enabled", "<current_mig>Disabled"),
            ("<pending_mig>Enabled", "<pending_mig>Disabled"),
            # as nvidia-smi prints no MIG instances (a10g.xml, tesla-t4.xml)
            ("(?s)<mig_devices>.*</mig_devices>", "<mig_devices>\n            None\n        </mig_devices>"),
            ("<gpu_util>N/A</gpu_util>", "<gpu_util>0 %</gpu_util>"),
        ),
        stub=A100_NVLINK,
        targets=("a100-80gb",),
    ),
    "mig": State("a100-sxm4-v12.xml", stub=A100_NVLINK, targets=("a100-80gb",)),
    "geforce": State("rtx-3060-v12.xml"),
    "older-driver": State("tesla-t4.xml", hide="before-r535"),
    "throttled": State(
        "rtx-3080-v13.xml",
        derive=(
            (
                "<clocks_event_reason_hw_thermal_slowdown>Not Active",
                "<clocks_event_reason_hw_thermal_slowdown>Active",
            ),
            (
                "<clocks_event_reason_sw_thermal_slowdown>Not Active",
                "<clocks_event_reason_sw_thermal_slowdown>Active",
            ),
            ("<sm_clock>1950 MHz</sm_clock>", "<sm_clock>1200 MHz</sm_clock>"),
        ),
    ),
    "processes": State("rtx-4000-sff-ada-v13.xml"),
    "h200": State("h200-580.159.04.xml", targets=("h200",)),
}


@pytest.fixture(scope="session")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in built once per run: one folder per library (``full``, ``before-r535``, ...)."""

    def make(folder: Path) -> None:
        for name, hide in LIBRARIES.items():
            build(folder / name, hide)

    return once_per_run(tmp_path_factory, "nvml-stand-in", make)


@pytest.fixture(scope="session")
def reading(stubs: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, Any]]:
    """envbuild's readings of each state of STATES (:func:`run`), made once per worker."""
    cache: dict[str, dict[str, Any]] = {}

    def get(name: str) -> dict[str, Any]:
        if name not in cache:
            cache[name] = run(stubs, tmp_path_factory.mktemp(name), STATES[name])
        return cache[name]

    return get


def run(stubs: Path, tmp_path: Path, state: State, **more: str | int | None) -> dict[str, Any]:
    """envbuild against ``state`` (``more``: stub keys added, a None drops one), the capture on PATH."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    xml = tmp_path / "capture.xml"
    xml.write_text(state.xml(), encoding="utf-8")
    stub_state = state_from_capture(state.xml(), {**state.stub, **more})
    return run_envbuild(stubs / state.hide, stub_state, tmp_path / "run", smi=xml)


def from_xml(state: State) -> HardwareFacts:
    return parse_nvidia_xml(state.xml(), "nvidia-smi -q -x")


def judged(
    facts: HardwareFacts, state: State
) -> tuple[list[tuple[str, str, tuple[str, ...]]], list[tuple[str, str]]]:
    """Each rule's (name, verdict, codes), and the findings but the unjudged list (it names the source)."""
    cat = load_catalog()
    order = Order(targets=tuple(c for t in state.targets if (c := cat.card(t))), gpus=len(facts.devices))
    got = judge_rules(facts, order, cat)
    return (
        [(v.rule, v.verdict, v.codes) for v in got.verdicts],
        [(f.code, f.message) for f in got.findings if f.code != "I-HW-UNJUDGED"],
    )


# ---- the differential: the same state through NVML and through nvidia-smi -q -x -------------------

# What cannot agree, and why: nvidia-smi -q -x prints no NVLink state, so the XML's facts leave it
# unreported (None) on a card that may have links (an A100 SXM), where NVML reads each link.  Where the
# capture's card has no NVLink connector, both say () (envbuild.hardware.links).
CANNOT_AGREE = {"nvlink_up"}


def comparable(dev: DeviceFacts, state: State) -> DeviceFacts:
    """``dev`` without the facts that cannot agree for ``state``, its processes in pid order."""
    out = replace(
        dev,
        processes=tuple(sorted(dev.processes, key=lambda p: p.pid or 0)) if dev.processes else dev.processes,
    )
    if "0.nvlink" in state.stub:
        out = replace(out, **{name: None for name in CANNOT_AGREE})
    return out


def differences(nvml: DeviceFacts, xml: DeviceFacts) -> dict[str, tuple[Any, Any]]:
    """field: (NVML's value, the XML's) for each field that differs."""
    a, b = asdict(nvml), asdict(xml)
    flat = {k: (a[k], b[k]) for k in a if k not in ("ecc", "pcie")}
    flat |= {f"{part}.{k}": (a[part][k], b[part][k]) for part in ("ecc", "pcie") for k in a[part]}
    return {k: pair for k, pair in flat.items() if pair[0] != pair[1]}


@pytest.mark.parametrize("name", sorted(STATES))
def test_nvml_and_nvidia_smi_agree_on_the_same_state(
    reading: Callable[[str], dict[str, Any]], name: str
) -> None:
    state = STATES[name]
    got = reading(name)
    nvml, xml = got["nvml"], from_xml(state)
    assert nvml is not None and nvml.source == "nvml"
    assert got["nvidia"] == nvml  # NVML answered, so nvidia-smi was not asked
    assert (nvml.driver_version, nvml.runtime_version) == (xml.driver_version, xml.runtime_version)
    assert len(nvml.devices) == len(xml.devices)
    for ours, theirs in zip(nvml.devices, xml.devices, strict=True):
        differ_by = differences(comparable(ours, state), comparable(theirs, state))
        if theirs.nvlink_up is None and ours.nvlink_up == ():  # the XML carries no NVLink state (h200)
            differ_by.pop("nvlink_up")
        assert differ_by == {}
    (nvml_rules, nvml_findings), (xml_rules, xml_findings) = judged(nvml, state), judged(xml, state)
    assert nvml_findings == xml_findings
    differ = {r for r, x in zip(nvml_rules, xml_rules, strict=True) if r != x}
    if "0.nvlink" in state.stub:  # NVML judges the links; the XML leaves them unjudged
        assert differ == {("nvlink", "passed", ())} or differ == set(), differ
        assert nvml.devices[0].nvlink_up == (True,) * 12 and xml.devices[0].nvlink_up is None
    elif xml.devices[0].nvlink_up is None:  # an H200 in a VM: NVML reports no link, the XML nothing
        assert differ == {("nvlink", "passed", ())}, differ
        assert nvml.devices[0].nvlink_up == ()
    else:
        assert differ == set()


def test_each_state_reads_as_its_capture_shows(reading: Callable[[str], dict[str, Any]]) -> None:
    """What each state is for, read through NVML (the differential above shows nvidia-smi agrees)."""
    facts = {name: reading(name)["nvml"] for name in STATES}
    healthy, mig = facts["healthy"].devices[0], facts["mig"].devices[0]
    assert (healthy.mig_mode, healthy.memory_used_mib, healthy.memory_total_mib) == (
        "Disabled",
        50.0,
        81920.0,
    )
    assert judged(facts["healthy"], STATES["healthy"])[1] == []
    assert (mig.mig_mode, mig.mig_devices, mig.utilization_gpu_pct) == ("Enabled", 4, None)
    assert [c for c, _ in judged(facts["mig"], STATES["mig"])[1]] == ["E-HW-MIG"]
    geforce = facts["geforce"].devices[0]
    assert (geforce.ecc.mode_current, geforce.mig_mode, geforce.fabric_state, geforce.fabric_status) == (
        (NOT_APPLICABLE,) * 4
    )
    assert (geforce.ecc.volatile_uncorrectable, geforce.ecc.remap_pending, geforce.nvlink_up) == (
        None,
        None,
        (),
    )
    throttled = facts["throttled"].devices[0]
    assert throttled.clock_event_reasons == ("hw_thermal_slowdown", "sw_thermal_slowdown")
    assert (throttled.sm_clock_mhz, throttled.sm_clock_max_mhz, throttled.utilization_gpu_pct) == (
        1200,
        2100,
        65,
    )
    xml = from_xml(STATES["throttled"]).devices[0]  # clocks/sm_clock, max_clocks/sm_clock
    assert (xml.sm_clock_mhz, xml.sm_clock_max_mhz) == (1200, 2100)
    # and, as captured, 9 GiB in use with no process listed (judged so from its XML too)
    assert [c for c, _ in judged(facts["throttled"], STATES["throttled"])[1]] == [
        "E-HW-CLOCKS",
        "W-HW-MEMORY-IN-USE",
    ]
    procs = facts["processes"].devices[0].processes
    assert [(p.pid, p.name, p.used_memory_mib) for p in procs] == [
        (1842, "cosmic-comp", 410),
        (3190, "/usr/bin/code", 451),
        (4937, "python", 160),
        (34626, "/usr/lib/chromium/chromium", 183),
    ]
    assert [c for c, _ in judged(facts["processes"], STATES["processes"])[1]] == ["W-HW-PROCESSES"]


# ---- the older driver ---------------------------------------------------------------------------


def test_an_older_driver_answers_through_the_older_names(reading: Callable[[str], dict[str, Any]]) -> None:
    """R515's library has no nvmlDeviceGetCurrentClocksEventReasons (R535's name) and no fabric calls:
    the reasons come through the older "throttle reasons" name, the fabric state is unreported, and
    the T4 (no NVLink connector, off any fabric) reads N/A, as from its XML."""
    got = reading("older-driver")
    dev = got["nvml"].devices[0]
    assert dev.clock_event_reasons == ()  # before: None (FunctionNotFound), the clock rule unjudged
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in got["calls"]
    assert "nvmlDeviceGetCurrentClocksEventReasons" not in got["calls"]  # not in this library
    assert (dev.fabric_state, dev.fabric_status, dev.nvlink_up) == (NOT_APPLICABLE, None, ())
    assert got["nvml"].provenance.binding_errors == ()


def test_a_library_without_the_v3_process_calls_leaves_processes_unreported(
    stubs: Path, tmp_path: Path
) -> None:
    """Derived: tesla-t4.xml through a library before R510 (no _v3 process calls).  nvidia-ml-py raises
    NVMLLibraryMismatchError (not an NVMLError) for the unversioned call; before, it escaped as a
    traceback.  Now the processes go unreported, the binding's error is recorded, the rest is read."""
    got = run(stubs, tmp_path, replace(STATES["older-driver"], hide="before-r510"))
    facts = got["nvml"]
    assert facts is not None and facts.devices[0].processes is None
    assert facts.devices[0].name == "Tesla T4" and facts.devices[0].ecc.retired_pages == 0
    assert [e.split(":")[0] for e in facts.provenance.binding_errors] == [
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses",
    ]
    assert "NVMLLibraryMismatchError" in facts.provenance.binding_errors[0]


# ---- the fabric, through the versioned call and its struct --------------------------------------

FABRIC = {"0.fabric_state": "Completed", "0.fabric_status": 0}  # derived: an NVSwitch system's answer


@pytest.mark.parametrize(
    ("library", "more", "called"),
    [
        ("full", {}, "nvmlDeviceGetGpuFabricInfoV"),  # v3, nvml.h's nvmlGpuFabricInfoV_t
        ("full", {"0.fabric_max_version": 2}, "nvmlDeviceGetGpuFabricInfoV"),  # an R550 driver: v2
        ("before-r535", {}, None),  # no fabric call at all: unreported
    ],
)
def test_fabric_state_through_the_versioned_call(
    stubs: Path, tmp_path: Path, library: str, more: dict[str, Any], called: str | None
) -> None:
    """Before: nvmlDeviceGetGpuFabricInfo(handle) without its struct raised TypeError on every machine."""
    state = replace(STATES["healthy"], hide=library)
    got = run(stubs, tmp_path, state, **FABRIC, **more)
    dev = got["nvml"].devices[0]
    if called is None:
        assert (dev.fabric_state, dev.fabric_status) == (None, None)
    else:
        assert (dev.fabric_state, dev.fabric_status) == ("Completed", "Success")
        assert called in got["calls"] and "nvmlErrorString" in got["calls"]


def test_fabric_through_the_two_argument_call_of_an_older_library(stubs: Path, tmp_path: Path) -> None:
    """A library with nvmlDeviceGetGpuFabricInfo but not the versioned call (R535): the two-argument
    call with nvml.h's nvmlGpuFabricInfo_t, whose 16-byte cluster UUID puts the state where the driver
    writes it (nvidia-ml-py's own struct before 13.6xx holds 80 bytes there)."""
    build(tmp_path / "r535", ("nvmlDeviceGetGpuFabricInfoV",))
    state = STATES["healthy"]
    xml = tmp_path / "capture.xml"
    xml.write_text(state.xml(), encoding="utf-8")
    stub_state = state_from_capture(state.xml(), {**state.stub, "0.fabric_state": "In Progress"})
    got = run_envbuild(tmp_path / "r535", stub_state, tmp_path / "run", smi=xml)
    dev = got["nvml"].devices[0]
    assert "nvmlDeviceGetGpuFabricInfo" in got["calls"]
    assert (dev.fabric_state, dev.fabric_status) == ("In Progress", None)
    # one GPU visible: the unfinished fabric is said, not failed (hardware/rules.py: fabric)
    assert "E-HW-FABRIC" not in [c for c, _ in judged(got["nvml"], state)[1]]


# ---- NVML failing: every query guarded ----------------------------------------------------------


@pytest.mark.parametrize(
    ("failing", "driver"),
    [
        ({"init": 9}, (None, None)),  # NVML_ERROR_DRIVER_NOT_LOADED: NVML does not initialise
        ({"fail.nvmlSystemGetDriverVersion": 999}, (None, None)),  # NVML_ERROR_UNKNOWN
        ({"fail.nvmlDeviceGetCount_v2": 17}, (None, None)),  # NVML_ERROR_OPERATING_SYSTEM
        ({"fail.nvmlDeviceGetHandleByIndex_v2": 15}, ("595.84", 1)),  # NVML_ERROR_GPU_IS_LOST
    ],
)
def test_nvml_failing_early_falls_back_to_nvidia_smi(
    stubs: Path, tmp_path: Path, failing: dict[str, int], driver: tuple[str | None, int | None]
) -> None:
    """Before: an NVMLError from the driver version, the count or a handle escaped nvml_facts.  Now
    nvidia-smi -q -x answers; validate/host's driver fact reads the driver version and count only."""
    state = STATES["processes"]
    got = run(stubs, tmp_path, state, **failing)
    assert got["nvml"] is None
    assert got["nvidia"] == from_xml(state) and got["nvidia"].source == "nvidia-smi -q -x"
    assert got["driver"] == driver


def test_no_state_is_no_driver(stubs: Path, tmp_path: Path) -> None:
    """The library loads but no driver answers (no state file): NVML is not read, nothing raises."""
    got = run_envbuild(stubs / "full", None, tmp_path)
    assert (got["nvml"], got["nvidia"], got["driver"]) == (None, None, (None, None))


def test_the_cuda_version_comes_from_the_unversioned_call_or_not_at_all(stubs: Path, tmp_path: Path) -> None:
    state = STATES["geforce"]
    got = run(stubs, tmp_path / "one", state, **{"fail.nvmlSystemGetCudaDriverVersion_v2": 13})
    assert got["nvml"].runtime_version == "12.8" and "nvmlSystemGetCudaDriverVersion" in got["calls"]
    both = {"fail.nvmlSystemGetCudaDriverVersion_v2": 13, "fail.nvmlSystemGetCudaDriverVersion": 13}
    got = run(stubs, tmp_path / "both", state, **both)
    assert got["nvml"].runtime_version is None and got["nvml"].devices[0].name == "NVIDIA GeForce RTX 3060"


def test_a_process_holding_no_memory_reads_zero_not_unreported(stubs: Path, tmp_path: Path) -> None:
    """Derived from rtx-4000-sff-ada-v13.xml: python's 160 MiB made 0 MiB.  Before: 0 bytes read None."""
    state = replace(
        STATES["processes"],
        derive=(("<used_memory>160 MiB</used_memory>", "<used_memory>0 MiB</used_memory>"),),
    )
    got = run(stubs, tmp_path, state)
    assert {p.pid: p.used_memory_mib for p in got["nvml"].devices[0].processes}[4937] == 0.0
    assert got["nvml"].devices[0].processes == from_xml(state).devices[0].processes


# ---- where the facts came from ------------------------------------------------------------------


def test_provenance_names_the_stand_in_and_the_binding(
    stubs: Path, reading: Callable[[str], dict[str, Any]]
) -> None:
    from importlib.metadata import version

    got = reading("mig")
    prov = got["nvml"].provenance
    assert prov.nvml_version == "stand-in 12.535.54.03"  # the stub says what it is
    assert prov.binding == f"nvidia-ml-py {version('nvidia-ml-py')}"
    assert prov.library == str(stubs / "full" / "libnvidia-ml.so.1")
    assert from_xml(STATES["mig"]).provenance is None


# ---- every NVML function envbuild calls is exercised --------------------------------------------

SOURCES = ("envbuild/hardware/live.py", "envbuild/hardware/nvml_device.py", "envbuild/validate/host.py")


def called_by_envbuild() -> set[str]:
    """The NVML functions named in envbuild's NVML readers (nvidia-ml-py's names)."""
    text = "".join((ROOT / path).read_text(encoding="utf-8") for path in SOURCES)
    return set(re.findall(r"\b(nvml(?:Init|Shutdown|ErrorString|System[A-Z]\w*|Device[A-Z]\w*))\b", text))


def test_every_nvml_function_envbuild_calls_reaches_the_library_in_some_state(
    stubs: Path, tmp_path: Path, reading: Callable[[str], dict[str, Any]]
) -> None:
    """Each name reaches the stub as itself or as the versioned entry point the binding calls for it
    (nvmlInit: nvmlInitWithFlags; nvmlDeviceGetCount: nvmlDeviceGetCount_v2): the states, and the
    fallbacks (a completed fabric, the CUDA version's older call, the fabric's two-argument call)."""
    calls: set[str] = set().union(*(reading(name)["calls"] for name in STATES))
    calls |= run(stubs, tmp_path / "fabric", STATES["healthy"], **FABRIC)["calls"]
    older = {"fail.nvmlSystemGetCudaDriverVersion_v2": 13}
    calls |= run(stubs, tmp_path / "older", STATES["older-driver"], **older)["calls"]
    build(tmp_path / "r535", ("nvmlDeviceGetGpuFabricInfoV",))
    fabric_v1 = state_from_capture(STATES["healthy"].xml(), FABRIC)
    calls |= run_envbuild(tmp_path / "r535", fabric_v1, tmp_path / "r535-run")["calls"]
    wanted = called_by_envbuild()
    assert len(wanted) > 30, sorted(wanted)
    missing = {n for n in wanted if not any(re.fullmatch(rf"{n}(_v\d+|WithFlags)?", c) for c in calls)}
    assert not missing, sorted(missing)


# Facts that change between two readings of one machine: the XML was captured just after the
# validation's load (SM clock 1980 MHz, no reason active), NVML read a moment later, idle.
MOMENTARY = {"clock_event_reasons", "sm_clock_mhz", "utilization_gpu_pct", "memory_used_mib"}


def test_the_stand_in_answers_for_the_h200_as_its_real_nvml_did(
    reading: Callable[[str], dict[str, Any]],
) -> None:
    """The stand-in, given the H200's XML, against what the driver's own libnvidia-ml answered on that
    machine through the same binding (recorded: tests/fixtures/smi/real/nvml/h200-580.159.04.json)."""
    recorded = json.loads((REAL.parent / "nvml" / "h200-580.159.04.json").read_text(encoding="utf-8"))
    real = recorded["nvml"]
    got = reading("h200")["nvml"]
    assert (got.driver_version, got.runtime_version) == (real["driver_version"], real["runtime_version"])
    (ours,), (theirs,) = got.devices, real["devices"]
    ours_data = json.loads(json.dumps(asdict(ours)))
    assert {k: v for k, v in ours_data.items() if k not in MOMENTARY} == {
        k: v for k, v in theirs.items() if k not in MOMENTARY
    }
    assert ours.nvlink_up == () and theirs["nvlink_up"] == []  # NVML: NOT_SUPPORTED for every link
    calls = {c["function"]: c["value"] for c in recorded["nvml_calls"] if c["device"] == "gpu0"}
    assert calls["nvmlDeviceGetRetiredPages"].startswith("raised NVMLError_NotSupported")
    assert calls["nvmlDeviceGetRemappedRows"] == "= [0, 0, 0, 0]"
