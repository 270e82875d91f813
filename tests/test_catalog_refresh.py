"""``envbuild catalog refresh`` / ``catalog show`` and the user overlay ``check`` reads.

Refresh runs as a subprocess against loopback servers:

- PyPI: the responses in tests/data/index-recorded/pypi/, RECORDED from https://pypi.org by
  scripts/record-index.py (see the README there; trimmed to a stated set of versions).  The server
  rewrites the files.pythonhosted.org host in the file URLs to its own, and answers 404 for every
  ``.metadata`` file that was not recorded (as pypi.org did for those).
- Where a case needs a release the real index does not have (a torch newer than the built-in catalog,
  which is current), the additions are WRITTEN BY HAND below (``HAND_*``), and say so.
- The PyTorch index (download.pytorch.org) is unreachable from here: its pages are WRITTEN BY HAND
  below (``HAND_PYTORCH_PAGES``), or the server is absent (a closed port).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import cli_support
import pytest
from index_support import loopback

from envbuild.catalog.index_pages import companion_facts, torch_facts

REPO = Path(__file__).resolve().parent.parent
RECORDED = Path(__file__).resolve().parent / "data" / "index-recorded" / "pypi"
FILES_HOST = "https://files.pythonhosted.org/"

# ---- WRITTEN BY HAND (not recorded): a torch 2.16.0 the built-in catalog lacks ----------------------
HAND_FILES_PREFIX = "packages/hand/"
HAND_TORCH = [
    {
        "filename": f"torch-2.16.0-{tag}-manylinux_2_28_x86_64.whl",
        "hashes": {"sha256": "0" * 64},
        "requires-python": ">=3.11",
        "url": f"{FILES_HOST}{HAND_FILES_PREFIX}torch-2.16.0-{tag}-manylinux_2_28_x86_64.whl",
        "yanked": False,
        "core-metadata": {"sha256": "1" * 64},
    }
    for tag in ("cp311-cp311", "cp312-cp312", "cp313-cp313")
]
HAND_VISION = [
    {
        "filename": "torchvision-0.30.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "hashes": {"sha256": "2" * 64},
        "requires-python": ">=3.11",
        "url": f"{FILES_HOST}{HAND_FILES_PREFIX}torchvision-0.30.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "yanked": False,
        "core-metadata": True,
    }
]
HAND_METADATA = {
    # torch 2.16.0: the CUDA 13.2 cuda-toolkit form and an exact triton pin, as 2.11+ wheels write them.
    "torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata": (
        "Metadata-Version: 2.4\nName: torch\nVersion: 2.16.0\nRequires-Python: >=3.11\n"
        "Requires-Dist: filelock\n"
        'Requires-Dist: cuda-toolkit[cudart,cufft,nvrtc]==13.2.1; platform_system == "Linux"\n'
        'Requires-Dist: nvidia-cudnn-cu13==9.30.0.1; platform_system == "Linux"\n'
        'Requires-Dist: triton==3.10.0; platform_system == "Linux"\n'
        'Requires-Dist: optree>=0.13.0; extra == "optree"\n'
    ),
    "torchvision-0.30.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata": (
        "Metadata-Version: 2.4\nName: torchvision\nVersion: 0.30.0\nRequires-Dist: numpy\n"
        "Requires-Dist: torch==2.16.0\nRequires-Dist: pillow>=5.3.0\n"
    ),
    # torchaudio 2.11.0 without any torch requirement (pypi.org served no .metadata for it here).
    "torchaudio-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata": (
        "Metadata-Version: 2.4\nName: torchaudio\nVersion: 2.11.0\nRequires-Python: >=3.10\n"
    ),
}
# WRITTEN BY HAND and deliberately WRONG (the real 2.15.0 wheel is the cu132 build with triton~=3.9.0):
# a metadata file that disagrees with the built-in 2.15 row, which must be reported and not applied.
HAND_WRONG = {
    "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata": (
        "Metadata-Version: 2.4\nName: torch\nVersion: 2.15.0\n"
        'Requires-Dist: cuda-toolkit[cudart]==13.0.3; platform_system == "Linux"\n'
        'Requires-Dist: triton==3.8.0; platform_system == "Linux"\n'
    ),
}
# The PyTorch index, WRITTEN BY HAND (download.pytorch.org is unreachable from here): PEP 503 pages.
_WHEEL = "torch-{v}%2B{var}-cp312-cp312-manylinux_2_28_x86_64.whl"


def _page(variants: dict[str, list[str]]) -> bytes:
    links = [
        f'<a href="/whl/{var}/{name}#sha256={"3" * 64}">{name.replace("%2B", "+")}</a><br/>'
        for v, vs in variants.items()
        for var in vs
        for name in [_WHEEL.format(v=v, var=var)]
    ]
    return (
        "<!DOCTYPE html><html><body><h1>Links for torch</h1>\n" + "\n".join(links) + "\n</body></html>"
    ).encode()


HAND_PYTORCH_ALL = {
    "1.13.1": ["cu117", "cpu"],  # older than the built-in catalog: its cu117 page is not read
    "2.15.0": ["cu126", "cu130", "cu132", "rocm7.2", "cpu"],
    "2.16.0": ["cu130", "cu132", "rocm7.2", "cpu"],
}
HAND_PYTORCH_PAGES = {
    "/whl/torch/": _page(HAND_PYTORCH_ALL),
    **{
        f"/whl/{var}/torch/": _page({v: [var] for v, vs in HAND_PYTORCH_ALL.items() if var in vs})
        for var in ("cu117", "cu126", "cu130", "cu132", "rocm7.2", "cpu")
    },
}


def _pypi_handler(
    hand: bool, log: list[tuple[str, str]], wrong: bool = False
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            log.append((self.path, self.headers.get("Accept", "")))
            base = f"http://127.0.0.1:{self.server.server_address[1]}/"
            parts = self.path.strip("/").split("/")
            body: bytes | None = None
            ctype = "application/octet-stream"
            if len(parts) == 2 and parts[0] == "simple":
                page_file = RECORDED / "simple" / parts[1] / "index.json"
                if page_file.is_file():
                    page = json.loads(page_file.read_text())
                    if hand and parts[1] == "torch":
                        page["files"] += HAND_TORCH
                        page["versions"].append("2.16.0")
                    if hand and parts[1] == "torchvision":
                        page["files"] += HAND_VISION
                        page["versions"].append("0.30.0")
                    body = json.dumps(page).replace(FILES_HOST, base).encode()
                    ctype = "application/vnd.pypi.simple.v1+json"
            elif parts[0] == "packages" and self.path.endswith(".metadata"):
                name = parts[-1]
                if hand and name in HAND_METADATA:
                    body = HAND_METADATA[name].encode()
                elif wrong and name in HAND_WRONG:
                    body = HAND_WRONG[name].encode()
                elif (RECORDED / "files" / name).is_file():
                    body = (RECORDED / "files" / name).read_bytes()
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _pytorch_handler(log: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            log.append(self.path)
            body = HAND_PYTORCH_PAGES.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "NO_PROXY": "127.0.0.1",
        "no_proxy": "127.0.0.1",
    }


def _overlay_file(env: dict[str, str]) -> Path:
    return Path(env["XDG_DATA_HOME"]) / "envbuild" / "catalog-overlay.json"


def envbuild(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return cli_support.envbuild(*args, env=env, cwd=REPO)


@pytest.fixture
def pypi_recorded() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    log: list[tuple[str, str]] = []
    with loopback(_pypi_handler(False, log)) as base:
        yield f"{base}/simple", log


@pytest.fixture
def pypi_hand() -> Iterator[str]:
    with loopback(_pypi_handler(True, [])) as base:
        yield f"{base}/simple"


@pytest.fixture
def pytorch_hand() -> Iterator[tuple[str, list[str]]]:
    log: list[str] = []
    with loopback(_pytorch_handler(log)) as base:
        yield f"{base}/whl", log


def _refresh(env: dict[str, str], index: str, torch_index: str) -> dict:
    proc = envbuild(env, "catalog", "refresh", "--json", "--index-url", index, "--torch-index", torch_index)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# ---- the recorded index, PyTorch index unreachable ----------------------------------------------------


def test_recorded_pypi_pytorch_unreachable(env: dict[str, str], pypi_recorded: tuple[str, list]) -> None:
    index, log = pypi_recorded
    dead = f"http://127.0.0.1:{_closed_port()}/whl"
    out = _refresh(env, index, dead)

    pypi, pytorch = out["indexes"]
    assert pypi == {"kind": "pypi", "url": index, "ok": True, "error": None}
    assert pytorch["kind"] == "pytorch" and pytorch["ok"] is False and "/whl/torch/" in pytorch["error"]
    assert out["releases"]["torch"] == ["2.7.1", "2.11.0", "2.12.0", "2.14.0", "2.14.1", "2.15.0"]
    assert out["releases"]["bpy"] == ["4.5.15", "5.0.1", "5.3.0"]
    # Every recorded release is in the built-in catalog (it is current): nothing new; first refresh.
    assert out["new"]["built_in"]["torch"] == [] and out["new"]["previous_overlay"] is None
    assert out["unconfirmed"]["torch"] == ["2.14.1", "2.15.0"]  # pypi.org served no .metadata for them
    assert out["disagreements"] == []
    # The project pages were asked for as PEP 691 JSON.
    assert (("/simple/torch/", "application/vnd.pypi.simple.v1+json")) in log

    overlay = json.loads(_overlay_file(env).read_text())
    assert overlay["format"] == 1 and overlay["indexes"][1]["ok"] is False
    rows = {r["version"]: r for r in overlay["torch"]}
    base = index.removesuffix("/simple")
    # 2.7.1: nvidia-*-cu12 pins, nvidia-cuda-runtime-cu12==12.6.77 -> cu126, triton==3.3.1 (recorded).
    assert (rows["2.7.1"]["cuda_major"], rows["2.7.1"]["default_variant"]) == (12, "cu126")
    assert rows["2.7.1"]["triton_requirement"] == "==3.3.1" and rows["2.7.1"]["confirmed"] is True
    # 2.11.0: cuda-toolkit[...]==13.0.2 and nvidia-cudnn-cu13 (recorded).
    assert (rows["2.11.0"]["cuda_major"], rows["2.11.0"]["default_variant"]) == (13, "cu130")
    assert rows["2.11.0"]["triton_requirement"] == "==3.6.0"
    # 2.14.0: triton~=3.8.0, a range (recorded).
    assert rows["2.14.0"]["triton_requirement"] == "~=3.8.0"
    assert rows["2.14.0"]["metadata_source"].startswith(base + "/packages/")
    assert rows["2.14.0"]["metadata_source"].endswith(
        "torch-2.14.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata"
    )
    assert rows["2.14.0"]["source"] == index + "/torch/"
    # No .metadata served: unconfirmed, nothing inferred; variants unknown (the PyTorch index unread).
    assert rows["2.15.0"]["confirmed"] is False and rows["2.15.0"]["cuda_major"] is None
    assert rows["2.15.0"]["variants"] is None
    assert "cp315" in rows["2.15.0"]["python"] and "cp310" not in rows["2.15.0"]["python"]
    comps = {(c["name"], c["version"]): c for c in overlay["companions"]}
    assert comps[("torchvision", "0.22.1")]["torch_requirement"] == "==2.7.1"
    assert comps[("torchvision", "0.28.0")]["torch_requirement"] == "==2.13.0"  # served for cp311 only
    assert comps[("torchaudio", "2.11.0")]["confirmed"] is False
    assert comps[("triton", "3.8.0")]["python"]
    # Nothing the overlay holds is usable on its own: check of a built-in profile states the overlay.
    proc = envbuild(env, "check", "pytorch", "--json")
    assert proc.returncode == 0, proc.stderr
    findings = {f["code"]: f for f in json.loads(proc.stdout)["findings"]}
    assert "I-OVERLAY" in findings and "W-OVERLAY-UNCONFIRMED" not in findings
    assert str(_overlay_file(env)) in findings["I-OVERLAY"]["message"]
    assert "0 days old" in findings["I-OVERLAY"]["message"]


def test_metadata_forms_recorded() -> None:
    """The three ways real torch wheels name their CUDA build, read from recorded .metadata files."""
    files = RECORDED / "files"
    assert torch_facts(
        (files / "torch-2.7.1-cp312-cp312-manylinux_2_28_x86_64.whl.metadata").read_bytes()
    ) == (
        12,
        "cu126",
        "==3.3.1",
    )
    # 2.12.0: cuda-toolkit without cublas, plus the unsuffixed nvidia-cublas range.
    assert torch_facts(
        (files / "torch-2.12.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata").read_bytes()
    ) == (
        13,
        "cu130",
        "==3.7.0",
    )
    assert (
        companion_facts((files / "torchaudio-2.2.1-cp312-cp312-manylinux1_x86_64.whl.metadata").read_bytes())
        == "==2.2.1"
    )
    assert (
        companion_facts(
            HAND_METADATA["torchaudio-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata"].encode()
        )
        is None
    )
    # Only an unsuffixed nvidia-* pin (written by hand): the major from its version.
    only = b"Name: torch\nRequires-Dist: nvidia-cublas<=14.1,>=14.0.1\n"
    assert torch_facts(only) == (14, None, None)


# ---- a torch release only the overlay has -----------------------------------------------------------


def _profile(tmp_path: Path, torch_version: str) -> Path:
    path = tmp_path / "overlay-torch.toml"
    path.write_text(
        f"""name = "overlay-torch"
kind = "pytorch"
[base]
os = "ubuntu24.04"
[accelerator]
backend = "cuda"
targets = ["h100"]
[python]
version = "3.12"
[torch]
version = "{torch_version}"
packages = ["torchvision"]
"""
    )
    return path


def test_new_release_from_overlay(
    tmp_path: Path, env: dict[str, str], pypi_hand: str, pytorch_hand: tuple[str, list[str]]
) -> None:
    torch_index, torch_log = pytorch_hand
    profile = _profile(tmp_path, "2.16.0")
    # Without an overlay the release is unknown: a usage error naming the refresh.
    proc = envbuild(env, "check", str(profile), "--json")
    assert proc.returncode == 2
    assert "torch.version" in proc.stderr and "envbuild catalog refresh" in proc.stderr

    out = _refresh(env, pypi_hand, torch_index)
    assert [i["ok"] for i in out["indexes"]] == [True, True], out["indexes"]  # PyPI, the PyTorch index
    assert out["new"]["built_in"]["torch"] == ["2.16.0"]
    assert out["new"]["built_in"]["torchvision"] == ["0.30.0"]
    # The root page, then each variant page of the releases from the built-in catalog's oldest series
    # up (not 1.13.1's cu117).
    assert sorted(torch_log) == sorted(
        ["/whl/torch/"] + [f"/whl/{v}/torch/" for v in ("cpu", "cu126", "cu130", "cu132", "rocm7.2")]
    )
    assert out["usable"]["2.16.0"]  # usable, with what is unconfirmed listed
    overlay = json.loads(_overlay_file(env).read_text())
    row = next(r for r in overlay["torch"] if r["version"] == "2.16.0")
    assert (row["cuda_major"], row["default_variant"], row["triton_requirement"]) == (13, "cu132", "==3.10.0")
    assert row["variants"] == ["cpu", "cu130", "cu132", "rocm7.2"]
    assert f"{torch_index}/cu132/torch/" in row["variants_source"]
    audio = next(c for c in overlay["companions"] if (c["name"], c["version"]) == ("torchaudio", "2.11.0"))
    assert audio["confirmed"] is True and audio["torch_requirement"] is None  # no torch pin at all
    rows15 = next(r for r in overlay["torch"] if r["version"] == "2.15.0")
    assert rows15["variants"] == ["cpu", "cu126", "cu130", "cu132", "rocm7.2"]

    # A second refresh: nothing new relative to the previous overlay.
    again = _refresh(env, pypi_hand, torch_index)
    assert again["new"]["previous_overlay"] == {k: [] for k in out["releases"]}
    assert again["new"]["built_in"]["torch"] == ["2.16.0"]

    proc = envbuild(env, "check", str(profile), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    findings = {f["code"]: f for f in result["findings"]}
    assert "E-TORCH-UNKNOWN" not in findings and result["ok"] is True
    warn = findings["W-OVERLAY-UNCONFIRMED"]
    assert warn["severity"] == "warning"
    assert "cu132 arch list is unknown" in warn["message"] and "sm_90" in warn["message"]
    assert warn["source"].endswith("torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata")
    assert "W-TORCH-UNCONFIRMED" in findings  # the overlay's new series is an unconfirmed release
    assert "I-OVERLAY" in findings
    plan = result["plan"]
    assert (plan["torch_version"], plan["torch_variant"]) == ("2.16.0", "cu132")
    pins = {p["name"]: p["version"] for p in plan["pins"]}
    assert pins["torch"] == "2.16.0" and pins["torchvision"] == "0.30.0"  # paired by its torch==2.16.0

    # catalog show: both origins, and the overlay's path and age.
    proc = envbuild(env, "catalog", "show", "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    origins = {p["version"]: p["origin"] for r in shown["torch"] for p in r["patches"]}
    assert origins["2.16.0"] == "overlay" and origins["2.14.1"] == "built-in"
    assert shown["overlay"]["path"] == str(_overlay_file(env)) and shown["overlay"]["age_days"] == 0
    assert [f["name"] for f in shown["built_in"]][:2] == ["cards.toml", "torch.toml"]
    text = envbuild(env, "catalog", "show").stdout
    assert "2.16.0" in text and "overlay" in text and "built-in" in text

    # A stale overlay: a warning instead of the info.
    data = json.loads(_overlay_file(env).read_text())
    data["fetched_at"] = (datetime.now(UTC) - timedelta(days=45)).isoformat()
    _overlay_file(env).write_text(json.dumps(data))
    proc = envbuild(env, "check", str(profile), "--json")
    findings = {f["code"]: f for f in json.loads(proc.stdout)["findings"]}
    assert findings["W-OVERLAY-STALE"]["severity"] == "warning" and "I-OVERLAY" not in findings
    assert "45 days old" in findings["W-OVERLAY-STALE"]["message"]


def test_pypi_unreachable_keeps_previous_overlay(
    env: dict[str, str], pypi_recorded: tuple[str, list]
) -> None:
    index, _ = pypi_recorded
    dead = f"http://127.0.0.1:{_closed_port()}"
    _refresh(env, index, dead + "/whl")
    before = _overlay_file(env).read_bytes()
    proc = envbuild(
        env, "catalog", "refresh", "--index-url", dead + "/simple", "--torch-index", dead + "/whl"
    )
    assert proc.returncode == 3  # the network, not the input
    assert "cannot read the package index" in proc.stderr and "nothing was written" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _overlay_file(env).read_bytes() == before
    assert [p.name for p in _overlay_file(env).parent.iterdir()] == [
        "catalog-overlay.json"
    ]  # no temp file left


def test_corrupt_overlay_is_ignored_with_a_warning(
    tmp_path: Path, env: dict[str, str], pypi_recorded: tuple[str, list]
) -> None:
    """A corrupt overlay is ignored with W-OVERLAY-INVALID naming the file, not an error: it is a
    record `catalog refresh` rebuilds at any time, the built-in catalog alone is always valid, and an
    error would block every command over a file the user never wrote."""
    path = _overlay_file(env)
    path.parent.mkdir(parents=True)
    path.write_text('{"format": 1, "fetched_at": "yesterday"')
    proc = envbuild(env, "check", "pytorch", "--json")
    assert proc.returncode == 0, proc.stderr
    findings = {f["code"]: f for f in json.loads(proc.stdout)["findings"]}
    warn = findings["W-OVERLAY-INVALID"]
    assert str(path) in warn["message"] and "not valid JSON" in warn["message"]
    shown = json.loads(envbuild(env, "catalog", "show", "--json").stdout)
    assert shown["overlay"]["in_force"] is False and "not valid JSON" in shown["overlay"]["error"]
    # A valid JSON file of the wrong shape names the key.
    path.write_text(json.dumps({"format": 1, "fetched_at": "2026-12-01T00:00:00+00:00"}))
    proc = envbuild(env, "check", "pytorch", "--json")
    message = {f["code"]: f for f in json.loads(proc.stdout)["findings"]}["W-OVERLAY-INVALID"]["message"]
    assert "envbuild_version" in message or "indexes" in message
    # refresh replaces it and says the previous one was unreadable.
    index, _ = pypi_recorded
    out = _refresh(env, index, f"http://127.0.0.1:{_closed_port()}/whl")
    assert str(path) in out["previous_overlay_error"]
    assert json.loads(path.read_text())["format"] == 1


def test_no_overlay_imports_nothing_new(env: dict[str, str]) -> None:
    """check of a built-in profile without an overlay imports neither the overlay nor the network code."""
    code = (
        "import sys\n"
        "from envbuild.cli import run\n"
        "try:\n"
        "    run(['check', 'pytorch-cpu'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "new = ('envbuild.catalog.overlay', 'envbuild.catalog.overlay_merge', 'envbuild.catalog.refresh',\n"
        "       'envbuild.catalog.index_pages', 'envbuild.net', 'urllib.request')\n"
        "bad = [m for m in new if m in sys.modules]\n"
        "print('LOADED', bad)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )
    assert "LOADED []" in proc.stdout, proc.stdout + proc.stderr


def test_new_release_pytorch_index_unreachable(tmp_path: Path, env: dict[str, str], pypi_hand: str) -> None:
    """Without the PyTorch index the overlay's release has its PyPI default build only, and says so."""
    out = _refresh(env, pypi_hand, f"http://127.0.0.1:{_closed_port()}/whl")
    assert out["indexes"][1]["ok"] is False
    notes = out["usable"]["2.16.0"]
    assert any("PyTorch index was not read" in n for n in notes)
    row = next(r for r in json.loads(_overlay_file(env).read_text())["torch"] if r["version"] == "2.16.0")
    assert row["variants"] is None and row["default_variant"] == "cu132"
    proc = envbuild(env, "check", str(_profile(tmp_path, "2.16.0")), "--json")
    result = json.loads(proc.stdout)
    warn = {f["code"]: f for f in result["findings"]}["W-OVERLAY-UNCONFIRMED"]
    assert "only the PyPI default build (cu132) is known" in warn["message"]
    assert "cu132 arch list is unknown" in warn["message"] and "sm_90" in warn["message"]
    assert result["plan"]["torch_variant"] == "cu132"
    # cu130 is not known for 2.16.0 without the PyTorch index.
    profile = _profile(tmp_path, "2.16.0")
    profile.write_text(profile.read_text().replace('backend = "cuda"', 'backend = "cuda"\nversion = "13.0"'))
    proc = envbuild(env, "check", str(profile), "--json")
    assert proc.returncode == 1
    assert "E-VARIANT-UNAVAILABLE" in {f["code"] for f in json.loads(proc.stdout)["findings"]}


def test_disagreement_reported_built_in_kept(env: dict[str, str]) -> None:
    log: list[tuple[str, str]] = []
    with loopback(_pypi_handler(False, log, wrong=True)) as base:
        out = _refresh(env, f"{base}/simple", f"http://127.0.0.1:{_closed_port()}/whl")
    assert out["disagreements"] == [
        "torch 2.15.0: the PyPI wheel's metadata names cu130 (CUDA 13); the built-in catalog says the PyPI "
        "default is cu132",
        "torch 2.15.0: its metadata requires triton==3.8.0 (3.8.0); the built-in catalog pairs triton 3.9.0",
    ]
    shown = json.loads(envbuild(env, "catalog", "show", "--json").stdout)
    assert shown["overlay"]["disagreements"] == out["disagreements"]
    rel = next(r for r in shown["torch"] if r["series"] == "2.15")
    assert rel["pypi_default_cuda"] == "cu132" and rel["patches"][0]["triton"] == "3.9.0"  # built-in kept
    text = envbuild(env, "catalog", "show").stdout
    assert "disagrees with the built-in catalog (built-in kept): torch 2.15.0" in text


def test_new_patch_of_a_built_in_series(tmp_path: Path) -> None:
    """A patch the built-in catalog lacks joins its built-in series as an unconfirmed patch (WRITTEN BY
    HAND: a torch 2.14.2 with a torchvision 0.29.3 that pins it); the series' built-in rows stay."""
    from envbuild.catalog import load_catalog
    from envbuild.catalog.overlay import CompanionRow, IndexRead, Overlay, TorchRow, findings
    from envbuild.catalog.overlay_merge import merge

    url = "http://127.0.0.1:1/simple/torch/"
    overlay = Overlay(
        format=1,
        fetched_at=datetime.now(UTC),
        envbuild_version="test",
        indexes=(IndexRead(kind="pypi", url=url, ok=True),),
        torch=(
            TorchRow(
                version="2.14.2",
                source=url,
                confirmed=True,
                python=("cp312",),
                metadata_source=url + "m",
                cuda_major=13,
                default_variant="cu130",
                triton_requirement="~=3.8.0",
            ),
        ),
        companions=(
            CompanionRow(
                name="torchvision", version="0.29.3", source=url, confirmed=True, torch_requirement="==2.14.2"
            ),
            CompanionRow(name="triton", version="3.8.0", source=url, confirmed=True),
            CompanionRow(name="triton", version="3.8.1", source=url, confirmed=True, yanked=True),
        ),
    )
    base = load_catalog()
    torch, state = merge(base.torch, base.toolkits, overlay, tmp_path / "o.json")
    rel = next(r for r in torch.release if r.series == "2.14")
    assert [p.version for p in rel.patch] == ["2.14.0", "2.14.1", "2.14.2"]
    new = rel.patch[-1]
    assert (new.torchvision, new.triton, new.tier) == (
        "0.29.3",
        "3.8.0",
        "unconfirmed",
    )  # yanked 3.8.1 skipped
    assert rel.status == "ga" and rel.cuda == next(r for r in base.releases if r.series == "2.14").cuda
    notes = state.usable["2.14.2"].notes("cu130")
    assert any("triton 3.8.0 chosen from the requirement triton~=3.8.0" in n for n in notes)
    assert any("built-in 2.14 rows" in n for n in notes)
    (_, (sev, code, message, source)) = findings(state, "2.14.2", "cu130", ("sm_90",))
    assert (sev, code, source) == ("warning", "W-OVERLAY-UNCONFIRMED", url + "m")
    assert message.startswith("torch 2.14.2 is known only from the catalog overlay, not the built-in catalog")
    assert "http" not in message  # the citation is in source, not in the message
    assert findings(state, "2.14.1", "cu130", ("sm_90",))[0][1] == "I-OVERLAY"  # a built-in patch: age only


def test_unwritable_data_folder_and_show_without_overlay(
    tmp_path: Path, env: dict[str, str], pypi_recorded: tuple[str, list]
) -> None:
    index, _ = pypi_recorded
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    bad = {**env, "XDG_DATA_HOME": str(blocker)}
    proc = envbuild(bad, "catalog", "refresh", "--index-url", index, "--torch-index", index + "/whl")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr  # the environment, not the input
    assert f"{blocker}/envbuild/catalog-overlay.json: cannot write the catalog overlay" in proc.stderr
    proc = envbuild(env, "catalog", "show")
    assert proc.returncode == 0
    assert f"overlay: none ({_overlay_file(env)} does not exist" in proc.stdout
    shown = json.loads(envbuild(env, "catalog", "show", "--json").stdout)
    assert shown["overlay"] is None and {p["origin"] for r in shown["torch"] for p in r["patches"]} == {
        "built-in"
    }
