"""``envbuild report fleet RUN...`` (issue 24 item 11): the runs of one order's lots side by side, with
outliers flagged, as a terminal table, ``--json`` and a self-contained ``--html`` page.

The lots are real validator runs on this machine (three, a few stages each).  This machine has one CPU
and no GPU, so where a test needs what differs between real lots (a driver, GPU UUIDs, a slower stage,
a drifted package) it edits a copy of a real run's report.json, said at each place.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from html.parser import HTMLParser
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_support import envbuild
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.validate import run_validation

REPO = Path(__file__).resolve().parent.parent
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
SCHEMA = json.loads((REPO / "docs" / "output.schema.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three real runs of the validator, as three lots of one order would each write one."""
    tmp = tmp_path_factory.mktemp("fleet")
    lock_file = tmp / "lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp)), encoding="utf-8")
    runs = []
    for n in range(3):
        _, run_dir = run_validation(lock_file, out=tmp / f"lot{n}", stages=["packages"], workdir=tmp)
        runs.append(run_dir)
    return runs


def _lots(real_runs: list[Path], tmp_path: Path, edits: dict[int, Any] | None = None) -> list[Path]:
    """Copies of the real runs named lot-1.., each report.json normalised (every stage 10 s, the run
    40 s: this machine's real sub-second timings are not what a test of outliers should depend on)
    and then changed by ``edits[i]`` where given."""
    out = []
    for i, src in enumerate(real_runs * 2):
        if i >= max(len(real_runs), max(edits or {0: None}) + 1):
            break
        dest = tmp_path / f"lot-{i + 1}"
        shutil.copytree(src, dest)
        data = json.loads((dest / "report.json").read_text(encoding="utf-8"))
        for stage in data["stages"]:
            stage["duration_s"] = 10.0
        data["duration_s"] = 40.0
        if edits and i in edits:
            edits[i](data)
        (dest / "report.json").write_text(json.dumps(data), encoding="utf-8")
        _remanifest(dest)
        out.append(dest)
    return out


def _remanifest(folder: Path) -> None:
    """MANIFEST.sha256 written again for the edited copy: it stands for a real lot's own run, whose
    manifest matches (``report fleet`` / ``report diff`` check it, issue 36)."""
    names = sorted(p.name for p in folder.iterdir() if p.name != "MANIFEST.sha256")
    lines = [f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}\n" for n in names]
    (folder / "MANIFEST.sha256").write_text("".join(lines), encoding="utf-8")


def _stage(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in data["stages"] if s["stage"] == name)


def _gpu(driver: str, name: str, uuid: str) -> Any:
    def change(data: dict[str, Any]) -> None:
        # what a GPU lot records (this machine has none): the driver and one device, with its UUID
        data["stages"].append(
            {"stage": "accelerator", "status": "passed", "duration_s": 10.0, "facts": {"driver": driver}}
        )
        data["stages"].append(
            {
                "stage": "devices",
                "status": "passed",
                "duration_s": 10.0,
                "facts": {"devices": [{"index": 0, "name": name, "arch": "sm_90", "uuid": uuid}]},
            }
        )

    return change


def test_real_runs_side_by_side(real_runs: list[Path]) -> None:
    from envbuild.report.fleet import load_fleet

    proc = envbuild("report", "fleet", *map(str, real_runs))
    assert proc.returncode == 0, proc.stderr  # three passing runs of one lock
    assert "all 3 lots passed; no outliers" in proc.stdout
    out = proc.stdout
    for run in real_runs:
        assert run.name in out
    for column in (
        "verdict",
        "first failure",
        "driver",
        "GPUs",
        "GPU UUIDs",
        "packages",
        "interpreter",
        "total",
    ):
        assert column in out, column
    fleet = load_fleet(real_runs)
    assert [lot.verdict for lot in fleet.lots] == ["PASSED"] * 3
    hashes = {lot.packages for lot in fleet.lots}
    assert len(hashes) == 1 and None not in hashes  # the same venv: the same package set
    assert fleet.stages == ("interpreter", "packages")
    # on the same machine the names and versions agree; only timings can differ, and only beyond noise
    assert all(o.column.endswith(" s") for o in fleet.outliers), fleet.outliers
    assert all(abs(o.value - o.reference) > 1.0 for o in fleet.outliers)


def test_a_slower_lot_and_a_drifted_package_set_are_flagged(real_runs: list[Path], tmp_path: Path) -> None:
    def slower(data: dict[str, Any]) -> None:
        _stage(data, "packages")["duration_s"] = 12.0  # 20 % slower than the other lots (copy edited)

    def sympy(data: dict[str, Any]) -> None:
        _stage(data, "packages")["facts"]["installed"]["sympy"] = "1.13.3"  # drifted (copy edited)

    def noise(data: dict[str, Any]) -> None:
        _stage(data, "interpreter")["duration_s"] = 10.5  # 5 %: under the 10 % floor, though MAD is 0

    lots = _lots(real_runs, tmp_path, {1: slower, 2: sympy, 3: noise})
    proc = envbuild("report", "fleet", *map(str, lots))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    slow = [ln for ln in lines if ln.startswith("outlier: stage packages s")]
    assert slow == ["outlier: stage packages s: lot-2 12.00 s, +20% against the median 10.00 s (MAD 0.00 s)"]
    drift = [ln for ln in lines if ln.startswith("outlier: packages")]
    assert len(drift) == 1 and "in lot-3; the majority (3 of 4) has" in drift[0]
    assert drift[0].endswith(f"(sympy {metadata.version('sympy')} -> 1.13.3, against lot-1)")
    assert not [ln for ln in lines if "interpreter" in ln and ln.startswith("outlier")]
    assert "lot-4" not in " ".join(ln for ln in lines if ln.startswith("outlier"))

    data = json.loads(envbuild("report", "fleet", *map(str, lots), "--json").stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["ok"] is False and data["command"] == "report fleet"
    assert {(o["column"], tuple(o["lots"])) for o in data["outliers"]} == {
        ("stage packages s", ("lot-2",)),
        ("packages", ("lot-3",)),
    }
    assert {f["code"] for f in data["findings"]} == {"W-FLEET-OUTLIER"}
    assert [lot["lot"] for lot in data["lots"]] == ["lot-1", "lot-2", "lot-3", "lot-4"]
    assert data["thresholds"] == {"mad_limit": 3.0, "floor": 0.1, "min_seconds": 1.0}


def test_driver_gpu_names_and_uuids(real_runs: list[Path], tmp_path: Path) -> None:
    from envbuild.report.fleet import load_fleet

    edits = {
        0: _gpu("570.124.06", "NVIDIA H200", "GPU-1111"),
        1: _gpu("570.124.06", "NVIDIA H200", "GPU-2222"),
        2: _gpu("550.54.15", "NVIDIA H100 80GB HBM3", "GPU-2222"),
    }
    fleet = load_fleet(_lots(real_runs, tmp_path, edits))
    found = {o.column: o for o in fleet.outliers}
    assert found["driver"].lots == ("lot-3",) and found["driver"].reference == "570.124.06"
    assert found["driver"].text == "driver: 550.54.15 in lot-3; the majority (2 of 3) has 570.124.06"
    assert found["gpu names"].lots == ("lot-3",)
    assert found["gpu uuid"].lots == ("lot-2", "lot-3") and "the same card twice" in found["gpu uuid"].text
    proc = envbuild("report", "fleet", *(str(tmp_path / f"lot-{i}") for i in (1, 2, 3)))
    assert proc.returncode == 1
    assert "GPU-1111" in proc.stdout and "550.54.15 !" in proc.stdout  # "!" marks the cell without colour


def test_html_page_is_self_contained_and_escaped(real_runs: list[Path], tmp_path: Path) -> None:
    evil = '<script>alert("x")</script><img src=http://evil.example/x.png>'

    def hostile(data: dict[str, Any]) -> None:
        # a machine's text in the report (copy edited): it must reach the page as text, never markup
        data["ok"] = False
        data["first_failure"] = {"stage": "packages", "error": evil}
        _stage(data, "packages")["status"] = "failed"

    lots = _lots(real_runs, tmp_path, {0: _gpu("570.1", evil, "GPU-&<>\"'"), 2: hostile})
    page_path = tmp_path / "fleet.html"
    proc = envbuild("report", "fleet", *map(str, lots), "--html", str(page_path), "--json")
    assert proc.returncode == 1 and json.loads(proc.stdout)["ok"] is False
    assert f"wrote {page_path}" in proc.stderr
    page = page_path.read_text(encoding="utf-8")
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    from envbuild.report.fleet import CSP as constant

    assert constant == CSP
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    assert "GPU-&amp;&lt;&gt;&#34;&#39;" in page

    class Parse(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []
            self.attrs: set[str] = set()
            self.text: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append(tag)
            self.attrs |= {name for name, _ in attrs}

        def handle_data(self, data: str) -> None:
            self.text.append(data)

    parsed = Parse()
    parsed.feed(page)
    allowed = "html head meta title style body main h1 h2 div table thead tbody tr th td code br ul li p"
    assert set(parsed.tags) <= set(allowed.split())
    assert parsed.attrs <= {
        "lang",
        "charset",
        "http-equiv",
        "content",
        "name",
        "class",
        "title",
    }  # no src/href
    text = "".join(parsed.text)
    assert evil in text  # shown as the text it is
    assert "FAILED" in text and "lot-3" in text and "outlier" in text


def test_outlier_rules() -> None:
    from envbuild.report.fleet import categorical_outliers, numeric_outliers

    # MAD 0: the 10 % floor decides
    assert numeric_outliers("x", [("a", 10.0), ("b", 10.0), ("c", 10.9)]) == []
    (one,) = numeric_outliers("x", [("a", 10.0), ("b", 10.0), ("c", 11.5)])
    assert one.lots == ("c",) and one.reference == 10.0
    # spread lots: 3 MADs decide (median 100, MAD 10: 125 is 2.5 MADs away, 135 is 3.5)
    spread = [("a", 90.0), ("b", 100.0), ("c", 110.0), ("d", 100.0), ("e", 80.0)]
    assert numeric_outliers("x", [*spread, ("f", 125.0)]) == []
    assert [o.lots for o in numeric_outliers("x", [*spread, ("f", 135.0)])] == [("f",)]
    # durations: under 1 s apart is noise however large the ratio
    assert numeric_outliers("s", [("a", 0.2), ("b", 0.2), ("c", 0.9)], minimum=1.0) == []
    assert numeric_outliers("x", [("a", 1.0), ("b", 5.0)]) == []  # two lots: no median to speak of
    # names: the majority's value is not flagged; with no majority every value is named
    (drv,) = categorical_outliers("driver", [("a", "570"), ("b", "570"), ("c", "550")])
    assert drv.lots == ("c",) and drv.reference == "570"
    (split,) = categorical_outliers("driver", [("a", "570"), ("b", "550")])
    assert split.text == "driver: no majority: 570 in a; 550 in b"
    assert categorical_outliers("driver", [("a", None), ("b", None), ("c", None)]) == []


def _performance(rank: int, bf16: float, address: str = "10.0.0.1:29500") -> Any:
    def change(data: dict[str, Any]) -> None:
        # what a GPU lot's performance stage records under --fleet (this machine has no GPU; copy edited)
        figure = {"figure": "matmul", "where": "cuda:0 bfloat16", "measured": bf16, "unit": "TFLOP/s"}
        fleet = {"node_rank": rank, "nodes": 4, "address": address, "peers": [], "network": None}
        data["stages"].append(
            {"stage": "performance", "status": "passed", "duration_s": 10.0,
             "facts": {"figures": [figure], "fleet": fleet}}
        )  # fmt: skip

    return change


def test_a_slow_lot_of_a_fleet_group_and_a_missing_rank_are_flagged(
    real_runs: list[Path], tmp_path: Path
) -> None:
    """Four lots of one --fleet group: ranks 0, 1, 2 and 2 again (rank 3's report missing, or a lot run
    twice); lot-2's bf16 matmul at half the others'."""
    edits = {
        0: _performance(0, 790.0),
        1: _performance(1, 395.0),
        2: _performance(2, 800.0),
        3: _performance(2, 795.0),
    }
    lots = _lots(real_runs, tmp_path, edits)
    proc = envbuild("report", "fleet", *map(str, lots))
    assert proc.returncode == 1, proc.stderr
    outliers = [ln for ln in proc.stdout.splitlines() if ln.startswith("outlier: ")]
    assert (
        "outlier: TFLOP/s matmul cuda:0 bfloat16: lot-2 395.00 TFLOP/s, -50% against the median "
        "792.50 TFLOP/s (MAD 5.00 TFLOP/s)" in outliers
    )
    assert (
        "outlier: fleet group 10.0.0.1:29500: the reports hold ranks [0, 1, 2, 2] of 4 lots (each rank once "
        "is a whole group: a report is missing, or a lot ran twice)"
    ) in outliers
    assert "1 of 4 at 10.0.0.1:29500" in proc.stdout and "performance stage" in proc.stdout
