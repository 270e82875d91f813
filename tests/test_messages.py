"""Finding messages say what is wrong and what to write instead; citations live in ``source``.

A broad set of plans (every built-in profile on every card, the release x backend x OS x Python sweep
of test_plan_matrix, and the error cases the planner tests build: memory, lots, drivers, Blender,
unpublished variants, unknown releases) is checked for citation patterns in user-facing text, and
the verdicts that rest on a catalog row are checked for a non-empty ``source``.
``check --verbose`` prints the sources, ``--json`` carries them, and the bundle README lists them.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import invoke
from plan_support import profile, req

from envbuild.catalog import load_catalog
from envbuild.models import CheckResult, Finding
from envbuild.plan import check
from envbuild.profile import builtin_names, load_profile
from envbuild.render.readme import render_readme

# What an internal citation looks like in the catalog's `source` strings (envbuild/data/*.toml) and
# in the design notes they quote; none of it means anything to a user deciding what to order.
CITATIONS = {
    "test-infra / release-matrix / builder abbreviations": r"\b(TI|RM|BLD)\b",
    "issue and pull-request references": r"\b(RFC|PR)\b|\w#\d+|\s#\d{3,}",
    "the design notes": r"§|compat-facts",
    "commit ids (7-12 hex digits mixing letters and digits)": (
        r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}\b"
    ),
    "tier letters": r"\((P|S)\b[^)]*\)|\[(P|S|unconfirmed)\]",
    "pairing rules quoted as evidence ('torchvision 2.7->0.22 rule', 'rule-derived')": r"\d->\d|\brule\b",
    "envbuild's own data files and build scripts": (
        r"\b(cards|torch|toolkits|platform|blender|abi|prices)\.toml\b|envbuild/data|\.sh\b|seeds/"
    ),
    "access dates and documents read": r"\bread \d{4}-\d{2}|release notes|upstream-observed|\bcite\b",
}
CITATION = re.compile("|".join(f"(?:{p})" for p in CITATIONS.values()))

# Verdicts of the card, toolkit, release, OS and Blender rules: each rests on catalog rows, which
# the finding cites in `source`.
SOURCED = {
    "E-ARCH-MISSING",
    "E-BASE-UNAVAILABLE",
    "E-BLENDER-DEVICE",
    "E-BLENDER-HIP-UNSUPPORTED",
    "E-BLENDER-OPTIX-DRIVER",
    "E-DRIVER-CARD",
    "E-DRIVER-PTX",
    "E-DRIVER-TOO-OLD",
    "E-GLIBC",
    "E-HOST-ARCH",
    "E-LOTS-MAX",
    "E-MEMORY-PER-CARD",
    "E-PYTHON-NO-WHEEL",
    "E-PYTHON-OS",
    "E-ROCM-TOO-OLD",
    "E-TOOLKIT-TOO-OLD",
    "E-VENDOR-MISMATCH",
    "I-ACCEL-PATCH",
    "I-ARCH-COMPAT",
    "I-CARD-DEVICES",
    "I-DRIVER-UNKNOWN",
    "I-LOT-IDLE",
    "I-OS-DERIVED",
    "I-ROCM-HOST",
    "I-TORCH-DEFAULT",
    "I-TORCH-PATCH",
    "I-VARIANT-DERIVED",
    "W-ARCH-PTX-JIT",
    "W-BLENDER-PTX-JIT",
    "W-BLENDER-UNCONFIRMED",
    "W-DRIVER-MINOR-COMPAT",
    "W-MEMORY-TIGHT",
    "W-MULTI-LOT",
    "W-NVIDIA-PIN",
    "W-PYTHON-EXPERIMENTAL",
    "W-ROCM-TOO-OLD",
    "W-TOOLKIT-OLD",
    "W-TORCH-UNCONFIRMED",
    "W-TRITON-ARCH",
}


# Not reachable with the built-in catalog: no card is older than sm_80 (Triton's floor), no OS has a
# glibc below the wheels', and every +PTX is for sm_120, the newest arch a card has.
UNREACHABLE = {"W-TRITON-ARCH", "E-GLIBC", "W-ARCH-PTX-JIT", "E-DRIVER-PTX"}


def _plans(folder: Path) -> Iterator[CheckResult]:
    cat = load_catalog()
    cards = cat.card_ids()
    for name in builtin_names():
        prof = load_profile(name)
        for card in cards:
            yield check(prof, targets=[card])
            yield check(prof, targets=[card], driver="535.54.03")
    versions = [r.series for r in cat.releases] + [r.patch[0].version for r in cat.releases]
    backends = {"cuda": ("h100",), "rocm": ("mi300x",), "cpu": ()}
    for version, (backend, targets), os_id, py in itertools.product(
        versions, backends.items(), [o.id for o in cat.oses], ["3.9", "3.11", "3.12", "3.14"]
    ):
        yield check(profile(backend=backend, targets=targets, torch=version, os=os_id, python=py))
    for card, backend in itertools.product(cards, ("cuda", "rocm", "cpu")):
        for memory, gpus in itertools.product((None, 40.0, 79.0, 75.0, 200.0), (1, 3, 22)):
            yield check(profile(backend=backend, targets=(card,), memory=memory, gpus=gpus))
        yield check(profile(backend=backend, targets=(card,), torch=None, kind="ubuntu", version="11.8"))
    for version, card in itertools.product(("11.8", "12.6", "12.9", "13.0", "6.1", "6.3", "99.0"), cards):
        yield check(profile(targets=(card,), version=version, torch="2.7.1"), driver="525.60.13")
        yield check(profile(backend="rocm", targets=(card,), version=version), driver="570.124.06")
    for series in [s.series for s in cat.blender.series] + ["4.5.3", "2.9"]:
        for card in cards:
            yield check(
                profile(
                    targets=(card,),
                    torch=None,
                    kind="blender",
                    blender=series,
                    devices=("OPTIX", "CUDA", "HIP", "ONEAPI"),
                    os="ubuntu22.04",
                ),
                driver="470.10.01",
            )
    for spec in ("2.99.0", "2.7.9", "2.8.0rc1", "2.7.1+cu118", "2.7"):
        # an unknown typed torch.version is a usage error; before the index is asked it is E-TORCH-UNKNOWN
        yield check(profile(torch=spec), strict_torch=False)
    pins = (
        req("nvidia-cublas-cu12==12.4.5.8", "nvidia-cublas-cu12"),
        req("nvidia-cudnn-cu11", "nvidia-cudnn-cu11"),
    )
    yield check(profile(lines=pins, version="12.8"))
    yield check(profile(backend="cpu", targets=(), torch=None, kind="pytorch"))
    yield check(profile(targets=("rtx5090",), version="12.6"), driver="535.54.03")
    yield check(profile(version="12.8.1"))
    yield check(profile(backend="rocm", targets=("mi300x",), version="6.2"))
    no_os = folder / "no-os.toml"  # base.os absent: an OS that has the CUDA 11.8 image is chosen
    no_os.write_text(
        'name = "n"\nkind = "pytorch"\n[accelerator]\nbackend = "cuda"\nversion = "11.8"\n'
        'targets = ["h100"]\n[python]\nversion = "3.10"\n[torch]\nversion = "2.7.1"\n'
    )
    yield check(load_profile(no_os))
    yield check(profile(backend="rocm", targets=("mi250x",), gpus=3, memory=60.0, torch=None, kind="pytorch"))


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return [f for result in _plans(tmp_path_factory.mktemp("plans")) for f in result.findings]


def test_the_patterns_catch_the_citations_that_leaked_before() -> None:
    leaked = [
        "torch 2.15.0: wheels not confirmed in a stored source (TI HEAD 61a77570 (P); RFC pytorch#172663)",
        "torchvision pair rule-derived (unconfirmed); torchvision 2.7->0.22 rule (P)",
        "reserve 1 GiB for the CUDA context, source pytorch/pytorch#107667",
        "IteraGPU rents 1 to 10 lots per order (provider guide, seeds/000_4434f24d215a3419.txt §2)",
        "torch 2.2 supports Python 3.12 only experimentally (release notes)",
        "Blender 4.3: interpolated between 4.2 and 4.5 (compat-facts §6) [unconfirmed]",
        "BLD release/2.1:manywheel/build_cuda.sh",
    ]
    assert all(CITATION.search(text) for text in leaked)
    fine = [
        "accelerator.version = \"12.8\" (inherited from profile 'pytorch') is not a ROCm version",
        "NVIDIA H100 SXM 80GB 80 GiB: at most ~79 GiB usable (reserve 1 GiB for the CUDA context)",
        "torch 2.7.1 carries sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90 and no compatible +PTX",
        "set base.os to one of 'ubuntu22.04', 'ubuntu24.04' or base.image",
        "gfx90a, gfx942 (MI300X) needs ROCm >= 6.0; set accelerator.version to 6.3",
    ]
    assert not any(CITATION.search(text) for text in fine)


def test_no_message_carries_a_citation(findings: list[Finding]) -> None:
    leaks = sorted({f"{f.code}: {f.message}" for f in findings if CITATION.search(f.message)})
    assert not leaks, "\n".join(leaks[:20])


def test_verdicts_from_the_catalog_cite_their_rows(findings: list[Finding]) -> None:
    seen = {f.code for f in findings}
    # the plans reach every sourced verdict the catalog allows (so the check below is not vacuous)
    assert seen >= SOURCED - UNREACHABLE, sorted(SOURCED - UNREACHABLE - seen)
    missing = sorted({f"{f.code}: {f.message}" for f in findings if f.code in SOURCED and not f.source})
    assert not missing, "\n".join(missing[:20])
    # a source names the row it comes from ("h100: ...", "torch 2.7: ...", "CUDA 12.8: ...")
    sources = [f.source for f in findings if f.code in SOURCED and f.source]
    assert all(re.match(r"^[\w .+-]+: \S", s) for s in sources)


def _cli(*args: str) -> tuple[int, str]:
    result = invoke(["check", *args])
    return result.exit_code, result.stdout


def test_check_verbose_prints_each_source_and_plain_check_does_not() -> None:
    code, plain = _cli("pytorch", "--target", "b200", "--driver", "560.35.05")
    assert code == 1 and "E-DRIVER-CARD" in plain and "source:" not in plain
    code, verbose = _cli("pytorch", "--target", "b200", "--driver", "560.35.05", "--verbose")
    assert code == 1
    lines = verbose.splitlines()
    at = next(i for i, line in enumerate(lines) if "E-DRIVER-CARD" in line)
    follow = next(line for line in lines[at + 1 :] if line.strip().startswith("source:"))
    assert "b200:" in follow
    # every finding with a source gets its line; messages themselves stay the same
    _, data = _cli("pytorch", "--target", "b200", "--driver", "560.35.05", "--json")
    sourced = [f for f in json.loads(data)["findings"] if f["source"]]
    assert sourced and sum(line.strip().startswith("source:") for line in lines) == len(sourced)


def test_check_json_carries_the_source_of_each_finding() -> None:
    code, out = _cli("pytorch", "--target", "h100", "--json")
    assert code == 0
    found = {f["code"]: f for f in json.loads(out)["findings"]}
    driver = found["I-DRIVER-UNKNOWN"]
    assert driver["source"].startswith("CUDA ") and not CITATION.search(driver["message"])


def test_readme_lists_the_sources_under_the_findings(tmp_path: Path) -> None:
    result = check(load_profile("pytorch"), targets=["b200"], driver="560.35.05")
    text = render_readme(result, "envbuild render pytorch --target b200")
    rows = [line for line in text.splitlines() if line.startswith("| error | `E-DRIVER-CARD`")]
    assert len(rows) == 1 and rows[0].endswith(" | [1] |")  # errors first: it cites source 1
    listing = text.split("Where the facts behind the findings come from", 1)[1]
    (card,) = [f for f in result.findings if f.code == "E-DRIVER-CARD"]
    assert card.source is not None and "\n1. b200: " in listing
    numbers = re.findall(r"^(\d+)\. ", listing.split("## ", 1)[0], flags=re.M)
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)]
    assert len(numbers) == len({f.source for f in result.findings if f.source})


# --- every finding is one line (issue 37) ----------------------------------------------------------

UV_REPORT = (
    "  × No solution found when resolving dependencies:\n"
    "  ╰─▶ Because vllm==0.34.0 depends on flashinfer-python==0.7.3 and only\n"
    "      flashinfer-python<=0.7.2.post1 is available, we can conclude that vllm==0.34.0 cannot be used.\n"
    "      And because you require vllm==0.34.0, we can conclude that your requirements are\r\n"
    "      unsatisfiable.\n"
)


def test_every_finding_of_the_broad_set_of_plans_is_one_line(findings: list[Finding]) -> None:
    spanning = [f for f in findings if {"\n", "\r"} & set(f.message + (f.source or ""))]
    assert findings and not spanning


def test_a_finding_quoting_a_tool_is_made_one_line_where_it_is_built() -> None:
    finding = Finding(severity="error", code="E-REQ-CONFLICT", message=f"cannot resolve:\n{UV_REPORT}")
    assert finding.message == (
        "cannot resolve: × No solution found when resolving dependencies: ╰─▶ Because vllm==0.34.0 depends "
        "on flashinfer-python==0.7.3 and only flashinfer-python<=0.7.2.post1 is available, we can conclude "
        "that vllm==0.34.0 cannot be used. And because you require vllm==0.34.0, we can conclude that your "
        "requirements are unsatisfiable."
    )
    listed = Finding(severity="info", code="I-X", message="two:\n  - A\n  - B", source="row\nURL\tx\x1b[2J")
    assert (listed.message, listed.source) == ("two: A; B", "row; URL x\\x1b[2J")


def test_an_error_in_json_output_is_one_line(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('source = "s"\ndate = "2026-01-01"\n[h1000]\n7 = 10.0\n[h100]\nx = 1.0\n')
    code, out = _cli("pytorch", "--prices", str(prices), "--json")
    (finding,) = json.loads(out)["findings"]
    assert code == 2 and finding["code"] == "E-USAGE"
    message = finding["message"]  # the list on stderr; here one line, its items joined with "; "
    assert message.startswith(f"invalid price file {prices} (3 problems): {prices}: source: expected")
    assert f"(a page, a quote); {prices}: h1000: not a card id" in message
    assert message.endswith(
        f"(besides source, date); {prices}: h100.x: not a rental duration in days; valid: 3, 7, 30"
    )
