"""report.html: one self-contained page per run (issue 24 item 10).

The page is written by write_report from report.json's content, listed in MANIFEST.sha256, escapes
every string from the machine, loads nothing (a CSP meta tag allows no script), and shows the verdict,
the stage ladder, package drift, hardware, checks and Blender renders in that order.  The last test
opens it in Debian's chromium through selenium (scripts/browser.sh installs both): the verdict text,
the inline images loaded, no console error, and a screenshot under the test's tmp folder.  It never
skips: without chromium it fails.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from envbuild.report.folder import MANIFEST
from envbuild.report.html import CSP
from envbuild.report.model import FirstFailure, LockRef, Report, StageResult
from envbuild.report.verify import verify_report
from envbuild.report.write import write_report

HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>&amp;\"quoted\""


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour RGB PNG, written with the standard library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\x00" + bytes(rgb) * width
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


def sample_report(ok: bool = False) -> Report:
    checks = [
        {
            "name": f"pilot {HOSTILE}",
            "argv": ["python", "-c", HOSTILE],
            "status": "passed" if ok else "failed",
            "returncode": 0 if ok else 3,
            "seconds": 0.42,
            "stragglers_killed": 1,
            "output_tail": f"line one\n{HOSTILE}\nlast line",
            "assertions": [
                {"kind": "exit_status", "expected": 0, "actual": 0 if ok else 3, "ok": ok},
                {"kind": "expect_json", "file": "summary.json", "key": "loss", "expected": "< 1", "ok": True},
            ],
            **({} if ok else {"error": f"exit status 3, expected 0 {HOSTILE}"}),
        }
    ]
    stages = (
        StageResult(stage="interpreter", status="passed", duration_s=0.12, facts={"version": "3.11.7"}),
        StageResult(stage="os", status="passed", duration_s=0.05, facts={"pretty_name": f"Debian {HOSTILE}"}),
        StageResult(
            stage="packages",
            status="passed" if ok else "failed",
            duration_s=0.4,
            facts={
                "lock_resolved": True,
                "installed_count": 3,
                "locked_count": 3,
                "missing": [] if ok else [f"sympy==1.14.0 {HOSTILE}"],
                "different": [] if ok else ["numpy 2.1.0 -> 2.0.0"],
                "wrong_variant": [],
                "broken": [],
                "extras": ["pip 24.0"],
            },
            error=None if ok else "1 missing, 1 different version",
        ),
        StageResult(
            stage="accelerator",
            status="passed",
            duration_s=1.5,
            facts={"torch_version": "2.13.0+cpu", "driver": None, "device_count": 0},
        ),
        StageResult(stage="extensions", status="skipped", facts={"reason": "skipped by --skip"}),
        StageResult(
            stage="blender",
            status="passed",
            duration_s=3.2,
            facts={
                "version": "4.2.0",
                "mode": "bpy",
                "renders": [
                    {"device": "CPU", "status": "passed", "render_s": 1.1, "image": "blender-cpu.png"},
                    {
                        "device": "CUDA",
                        "status": "passed",
                        "render_s": 0.3,
                        "psnr_db": 41.2,
                        "image": "blender-cuda.png",
                    },
                ],
            },
        ),
        StageResult(
            stage="checks",
            status="passed" if ok else "failed",
            duration_s=0.5,
            facts={"checks": checks, "workdir": "/work/app", "warnings": [f"check left 1 process {HOSTILE}"]},
            error=None if ok else f"check 'pilot': exit status 3 {HOSTILE}",
            hint=None if ok else "see the check's output tail",
        ),
    )
    return Report(
        run_id="20250101T000000Z-abcdef",
        envbuild_version="0.1.0",
        started_at="2025-01-01T00:00:00+00:00",
        finished_at="2025-01-01T00:00:06+00:00",
        duration_s=6.0,
        python="/opt/venv/bin/python",
        workdir="/work/app",
        lock=LockRef(
            path=f"/etc/envbuild/{HOSTILE}.json", sha256="0" * 64, content={"profile_name": "pytorch-cpu"}
        ),
        stages=stages,
        first_failure=None if ok else FirstFailure(stage="packages", error=f"1 missing {HOSTILE}"),
        stage_reached="checks",
        ok=ok,
        host={"hostname": f"box-{HOSTILE}", "cpus": 2, "machine": "x86_64", "mem_available_bytes": 8 * 2**30},
    )


IMAGES = {"blender-cpu.png": png(48, 32, (200, 40, 40)), "blender-cuda.png": png(48, 32, (40, 40, 200))}


def written(tmp_path: Path, report: Report) -> Path:
    run_dir = tmp_path / report.run_id
    run_dir.mkdir()
    write_report(run_dir, report, {}, {"PATH": "/usr/bin"}, IMAGES)
    return run_dir


def test_html_report_is_self_contained_escaped_in_order_and_in_the_manifest(tmp_path: Path) -> None:
    run_dir = written(tmp_path, sample_report())
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert CSP == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    # the CSP is envbuild's own constant, written as it is (as in fleet.html); everything else is escaped
    # by Jinja's autoescape (markupsafe: ' as &#39;, " as &#34;)
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    assert "report.html" in (run_dir / MANIFEST).read_text() and verify_report(run_dir) == []
    # nothing from the machine becomes markup: no script, no injected element or attribute
    assert "<script" not in page.lower() and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    assert "&amp;amp;&#34;quoted&#34;" in page
    # nothing is loaded: the only URL is the SVG namespace, every image a data: URI
    assert re.findall(r"https?://[^\"' <]+", page) == ["http://www.w3.org/2000/svg"]
    assert re.findall(r'src="([^":]+):', page) == ["data", "data"]
    assert "<link" not in page and "url(" not in page
    # in reading order
    ids = ["verdict", "first-failure", "ladder", "packages", "hardware", "checks", "blender"]
    positions = [page.index(f'id="{i}"') for i in ids]
    assert positions == sorted(positions)
    assert ">FAILED<" in page and "sympy==1.14.0" in page and "numpy 2.1.0 -&gt; 2.0.0" in page
    assert "expect_json" in page and "stragglers_killed" in page  # the check's records, shown generically


def test_html_report_of_a_real_run_is_listed_in_the_manifest(tmp_path: Path) -> None:
    from validate_support import cpu_lock

    from envbuild.validate import run_validation

    report, run_dir = run_validation(
        cpu_lock(tmp_path), out=tmp_path / "runs", stages=["os"], workdir=tmp_path
    )
    assert report.ok and verify_report(run_dir) == []
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert ">PASSED<" in page and report.run_id in page


CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.mark.slow
def test_html_report_in_chromium(tmp_path: Path) -> None:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(
            f"{CHROMIUM} / {CHROMEDRIVER} missing: run scripts/browser.sh (the browser test never skips)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    report = sample_report()
    run_dir = written(tmp_path, replace(report, stages=report.stages))
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--window-size=1200,1600",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get((run_dir / "report.html").as_uri())
        assert driver.find_element(By.ID, "verdict-word").text == "FAILED"
        assert "1 missing" in driver.find_element(By.ID, "first-failure").text
        assert driver.title.startswith("FAILED")
        images = driver.find_elements(By.CSS_SELECTOR, "img.render")
        assert len(images) == 2
        for img in images:
            assert (
                driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img) == 48
            )
        # the machine's strings are text, never elements
        assert driver.execute_script("return document.scripts.length") == 0
        assert len(driver.find_elements(By.CSS_SELECTOR, "img")) == 2
        bars = driver.find_elements(By.CSS_SELECTOR, "#ladder rect")
        assert len(bars) == len(report.stages)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1200, int(height) + 120)  # the whole page in the screenshot
        shot = tmp_path / "report.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 0
        severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert severe == []
    finally:
        driver.quit()
