"""Verbatim requirement files of widely used projects (tests/corpus/, SOURCES.toml) as users bring them.

Each case is a profile written by hand for this test (tests/corpus/<project>/envbuild*.toml) that names
one unmodified file and a torch / CUDA / Python / card.  For each:

* ``check`` gives the verdict stated below, for the reason stated (the findings' codes and words);
* ``render`` keeps every line that applies on the image: pip's own parser reads the corpus file (its
  ``-r`` includes too) and the rendered ``requirements-rebuild.txt``; every applicable requirement is
  in the bundle as written, or (a torch-family line) replaced by an exact pin that satisfies it;
* the files are byte-identical to the sha256 recorded in SOURCES.toml.

No network: ``envbuild lock`` on these bundles was run by hand (see the issue 13 note).
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envbuild.models import Finding
from envbuild.plan import check
from envbuild.profile import load_profile
from envbuild.render import render_bundle

CORPUS = Path(__file__).parent / "corpus"
SOURCES = tomllib.loads((CORPUS / "SOURCES.toml").read_text(encoding="utf-8"))["file"]


@dataclass(frozen=True)
class Case:
    profile: str  # under tests/corpus/
    requirements: str  # the corpus file the profile names
    ok: bool
    says: dict[str, tuple[str, ...]]  # finding code -> words every such finding's message holds
    pins: dict[str, str] = field(default_factory=dict)  # name -> the exact pin the plan writes
    never: frozenset[str] = frozenset()  # codes that must not appear
    options: tuple[str, ...] = ()  # index options the bundle must carry


CASES = {
    # torchvision 0.28.0's metadata pins torch==2.13.0; no torchaudio release pins 2.13 (upstream stopped
    # at 2.11): torchaudio 2.11.1 declares torch>=2.11, so the bare line goes with it by declaration.
    "comfyui": Case(
        "comfyui/envbuild.toml",
        "comfyui/requirements.txt",
        ok=True,
        says={"I-COMPANION-DECLARED": ("torchaudio 2.11.1", "requires torch>=2.11")},
        pins={"torchvision": "torchvision==0.28.0+cu130", "torchaudio": "torchaudio==2.11.1"},
        never=frozenset({"E-REQ-CONFLICT", "E-COMPANION-UNAVAILABLE"}),
    ),
    # vLLM pins torch==2.13.0, torchvision==0.28.0 (its metadata: torch==2.13.0) and torchaudio==2.11.0,
    # whose wheels declare no torch requirement: the user's pin is kept; the FlashInfer index stays.
    "vllm": Case(
        "vllm/envbuild.toml",
        "vllm/requirements/cuda.txt",
        ok=True,
        says={"I-COMPANION-DECLARED": ("'torchaudio==2.11.0' is kept", "declares no torch requirement")},
        pins={"torch": "torch==2.13.0+cu130", "torchvision": "torchvision==0.28.0+cu130"},
        never=frozenset({"E-REQ-CONFLICT", "E-COMPANION-UNAVAILABLE", "E-COMPANION-MISMATCH"}),
        options=("--extra-index-url https://flashinfer.ai/whl/",),
    ),
    # Built for torch 2.9: xformers 0.0.33.post2 (Requires-Dist torch==2.9.1), exllamav3 (+cu128.torch2.9.0)
    # and flash-attn (+cu128torch2.9.0cxx11abiFALSE) wheels on cp313: refused next to torch 2.7.1.
    "text-generation-webui-torch2.7": Case(
        "text-generation-webui/envbuild-torch2.7.toml",
        "text-generation-webui/requirements/full/requirements.txt",
        ok=False,
        says={"E-ABI-MISMATCH": ("torch 2.7.1+cu128",)},
        never=frozenset({"E-WHEEL-TAGS"}),
    ),
    # On torch 2.9.1 (what its xformers pin requires) every torch-2.9 CUDA 12 wheel fits.  The flash-attn
    # wheel's "cxx11abiFALSE" is a constant its builder writes into every name (kingbri1/flash-attention
    # build-wheels.yml renames the wheel so), not the build's ABI: it is not held against torch 2.9's
    # C++11 ABI.  (Before this was known, check refused the line: a false refusal.)
    "text-generation-webui-torch2.9": Case(
        "text-generation-webui/envbuild-torch2.9.toml",
        "text-generation-webui/requirements/full/requirements.txt",
        ok=True,
        says={},
        never=frozenset({"E-WHEEL-TAGS", "E-ABI-MISMATCH", "W-ABI-KERNELS-SKIPPED"}),
    ),
    # No torch-family line; nothing in it is coupled to torch's binaries: ok.
    "llama-factory": Case(
        "llama-factory/envbuild.toml",
        "llama-factory/requirements.txt",
        ok=True,
        says={},
        never=frozenset({"E-REQ-CONFLICT"}),
    ),
    # triton==2.0.0 went with torch 2.0; torch 2.1.2's own Requires-Dist is triton==2.1.0 (and no catalog
    # torch allows 2.0.0).  The VCS line (clip @ git+https://...) is kept and needs git in the image.
    "generative-models": Case(
        "generative-models/envbuild.toml",
        "generative-models/requirements/pt2.txt",
        ok=False,
        says={"E-COMPANION-MISMATCH": ("'triton==2.0.0'", "torch 2.1.2 requires triton==2.1.0")},
        pins={"torchvision": "torchvision==0.16.2+cu121", "torchaudio": "torchaudio==2.1.2+cu121"},
    ),
}


def _summary(findings: tuple[Finding, ...]) -> str:
    return "\n".join(f"{f.severity} {f.code}: {f.message}" for f in findings)


@pytest.mark.parametrize("row", SOURCES, ids=[r["file"] for r in SOURCES])
def test_files_are_byte_identical_to_their_sources(row: dict[str, str]) -> None:
    data = (CORPUS / row["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == row["sha256"], row["file"]
    assert len(row["commit"]) == 40 and "/" in row["repository"] and row["path"]


def test_every_corpus_file_is_recorded_and_judged() -> None:
    on_disk = {
        p.relative_to(CORPUS).as_posix()
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name not in ("SOURCES.toml", "README.md") and not p.name.startswith("envbuild")
    }
    assert on_disk == {r["file"] for r in SOURCES}
    judged = {c.requirements for c in CASES.values()}
    assert judged | {"vllm/requirements/common.txt"} == on_disk  # common.txt is judged through cuda.txt


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_verdict_and_reason(name: str) -> None:
    case = CASES[name]
    result = check(load_profile(str(CORPUS / case.profile)))
    summary = _summary(result.findings)
    assert result.ok is case.ok, summary
    errors = {f.code for f in result.findings if f.severity == "error"}
    assert errors <= set(case.says), summary  # every error is one the case expects, for its reason
    for code, words in case.says.items():
        found = [f for f in result.findings if f.code == code]
        assert found, summary
        for finding in found:
            for word in words:
                assert word in finding.message, summary
    assert not (case.never & {f.code for f in result.findings}), summary
    pins = {p.name: p.spec for p in result.plan.pins}
    for pin_name, spec in case.pins.items():
        assert pins.get(pin_name) == spec, pins


def test_torch_27_refuses_each_torch_29_build_and_names_the_pairing_that_works() -> None:
    result = check(load_profile(str(CORPUS / CASES["text-generation-webui-torch2.7"].profile)))
    refused = {f.message.split(":")[1] for f in result.findings if f.code == "E-ABI-MISMATCH"}
    assert refused == {"34", "51", "53"}  # xformers, exllamav3 and flash-attn (Linux lines); not 50/52
    messages = {f.message.split(":")[1]: f.message for f in result.findings if f.code == "E-ABI-MISMATCH"}
    assert 'set torch.version = "2.9.1"' in messages["34"] and 'set torch.version = "2.9.1"' in messages["51"]
    assert "built for torch 2.9 / CUDA 12.8" in messages["51"]


def _pip_requirements(path: Path) -> tuple[list[str], list[str]]:
    """(requirement strings, option lines) as pip reads ``path`` (following -r)."""
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import RequirementsFileParser, get_line_parser

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        session = PipSession()
    reqs: list[str] = []
    options: list[str] = []
    for line in RequirementsFileParser(session, get_line_parser(None)).parse(str(path), constraint=False):
        if line.requirement is not None:
            reqs.append(line.requirement)
        else:
            for url in line.opts.extra_index_urls or []:
                options.append(f"--extra-index-url {url}")
    return reqs, options


def _environment(python: str) -> dict[str, str]:
    env = dict(default_environment())
    env.update(
        python_version=python,
        python_full_version=f"{python}.0",
        platform_system="Linux",
        platform_machine="x86_64",
        sys_platform="linux",
        os_name="posix",
        implementation_name="cpython",
        platform_python_implementation="CPython",
    )
    return env


def _named(text: str) -> Requirement | None:
    """A pip requirement string as a PEP 508 requirement; a bare wheel URL named from its file name."""
    try:
        return Requirement(text)
    except Exception:
        url, _, marker = text.partition(";")
        stem = url.strip().rsplit("/", 1)[-1]
        if not stem.endswith(".whl"):
            return None
        return Requirement(f"{stem.split('-')[0]} @ {url.strip()}" + (f" ; {marker}" if marker else ""))


@pytest.mark.parametrize("name", sorted(CASES))
def test_render_keeps_every_applicable_line(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    checked = check(load_profile(str(CORPUS / case.profile)))
    bundle = render_bundle(checked, tmp_path / "b", command="envbuild render corpus", force=True)
    rendered, rendered_options = _pip_requirements(bundle / "requirements-rebuild.txt")
    out = [r for r in (_named(t) for t in rendered) if r is not None]
    declared, _ = _pip_requirements(CORPUS / case.requirements)
    env = _environment(checked.plan.profile.python.version)
    pins = {p.name: p for p in checked.plan.pins}
    kept = 0
    for text in declared:
        req = _named(text)
        assert req is not None, text
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        key = canonicalize_name(req.name)
        same = [
            r
            for r in out
            if canonicalize_name(r.name) == key
            and r.url == req.url
            and r.specifier == req.specifier
            and r.extras == req.extras
        ]
        if same:
            kept += 1
            continue
        pin = pins.get(key)
        assert pin is not None, f"{text!r} is missing from the bundle"
        assert req.url is None and req.specifier.contains(pin.spec.split("==")[1], prereleases=True), (
            f"{text!r} was replaced by {pin.spec}, which does not satisfy it"
        )
        assert any(
            canonicalize_name(r.name) == key and str(r.specifier) == f"=={pin.spec.split('==')[1]}"
            for r in out
        )
    assert kept >= len(declared) // 2  # most lines are the user's own, as written
    for option in case.options:
        assert option in rendered_options


def test_flash_attn_own_abi_label_still_counts_but_a_full_version_label_does_not() -> None:
    """flash-attn's own ``+cu12torch2.9cxx11abiFALSE`` is the build's ABI (refused next to torch 2.9);
    the same label after a full torch version (``+cu128torch2.9.0cxx11abiFALSE``) is a builder's constant."""
    from plan_support import profile, req

    base = "https://example.invalid/flash_attn-2.8.3+{tag}-cp312-cp312-linux_x86_64.whl"
    own = req(f"flash-attn @ {base.format(tag='cu12torch2.9cxx11abiFALSE')}", "flash-attn")
    full = req(f"flash-attn @ {base.format(tag='cu128torch2.9.0cxx11abiFALSE')}", "flash-attn")
    refused = check(profile(torch="2.9.1", version="12.8", lines=(own,)))
    assert "the pre-C++11 ABI" in next(f.message for f in refused.findings if f.code == "E-ABI-MISMATCH")
    kept = check(profile(torch="2.9.1", version="12.8", lines=(full,)))
    assert kept.ok and "E-ABI-MISMATCH" not in {f.code for f in kept.findings}
