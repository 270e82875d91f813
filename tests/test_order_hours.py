"""Issue 37 item 5: the hours the job needs (``[order] hours`` in the profile, or ``--hours N``) against
each rental duration the provider's terms know (envbuild/data/prices.toml: 3, 7, 30 days): which fit,
the hours left unused or the overrun and which duration to look at, and each one's price only where the
catalog (or --prices) has a sourced price.  Never an hourly rate.  Profiles are written by hand here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_support import envbuild

REPO = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return envbuild(*args, cwd=REPO)


def job(tmp_path: Path, target: str, order: str = "") -> str:
    path = tmp_path / "job.toml"
    text = f'name = "job"\nextends = "pytorch"\n[accelerator]\ntargets = ["{target}"]\n{order}'
    path.write_text(text, encoding="utf-8")
    return str(path)


def hours_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout.replace("\n                   ", " ")  # rich folds the order column
    return [
        " ".join(line.split()) for line in text.splitlines() if line.startswith("order") and "hours:" in line
    ]


def test_profile_hours_48_on_rtx4090_fits_each_duration_with_the_sourced_price(tmp_path: Path) -> None:
    proc = run("check", job(tmp_path, "rtx4090", "[order]\nhours = 48\n"))
    assert hours_lines(proc) == [
        "order hours: 48 hours in a 3-day rental (72 hours) leaves 24 hours unused; rtx4090: 1 x 47.14 USD "
        "= 47.14 USD",
        "order hours: 48 hours in a 7-day rental (168 hours) leaves 120 hours unused; rtx4090: 1 x 110.00 "
        "USD = 110.00 USD",
        "order hours: 48 hours in a 30-day rental (720 hours) leaves 672 hours unused; rtx4090: 1 x 390.00 "
        "USD = 390.00 USD",
    ]


def test_hours_78_exceeds_three_days_by_6_and_points_at_seven(tmp_path: Path) -> None:
    proc = run("check", job(tmp_path, "rtx4090"), "--hours", "78", "--days", "3")
    assert hours_lines(proc) == [
        "order hours: 78 hours exceeds 3 days (72 hours) by 6 hours: look at 7 days or a smaller protocol"
    ]


def test_hours_beyond_every_duration_says_no_rental_holds_it(tmp_path: Path) -> None:
    (line, *_) = hours_lines(run("check", job(tmp_path, "rtx4090"), "--hours", "800", "--days", "30"))
    assert "800 hours exceeds 30 days (720 hours) by 80 hours: no rental holds it" in line


def test_no_price_known_is_said_and_no_hourly_rate_is_made_up(tmp_path: Path) -> None:
    """h100 has no row in prices.toml: each fitting duration says so; nothing is priced per hour."""
    proc = run("check", job(tmp_path, "h100"), "--hours", "48")
    lines = hours_lines(proc)
    assert len(lines) == 3 and all(line.endswith("h100: no price known") for line in lines)
    assert "USD" not in " ".join(lines) and "per hour" not in proc.stdout and "/h" not in proc.stdout


def test_cli_hours_replaces_the_profile_and_reaches_the_readme(tmp_path: Path) -> None:
    out = tmp_path / "b"
    proc = run(
        "render", job(tmp_path, "rtx4090", "[order]\nhours = 10\n"), "--hours", "78", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "- Hours the job needs (`[order] hours` or `--hours`): 78\n" in readme
    assert (
        "  - 78 hours exceeds 3 days (72 hours) by 6 hours: look at 7 days or a smaller protocol\n" in readme
    )
    assert (
        "  - 78 hours in a 7-day rental (168 hours) leaves 90 hours unused; rtx4090: 1 x 110.00 USD" in readme
    )
    assert "--hours 78" in readme  # the regenerate command
    inputs = json.loads((out / "envbuild.inputs.json").read_text(encoding="utf-8"))
    assert inputs["profile"]["order"]["hours"] == 78  # lock writes the same README from it


def test_without_hours_nothing_is_said(tmp_path: Path) -> None:
    assert hours_lines(run("check", job(tmp_path, "rtx4090"))) == []


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0", "0 is not a positive number of hours"),
        ("-3", "-3 is not a positive number of hours"),
        ("nan", "nan is not a positive number of hours"),
        ("abc", "'abc' is not a valid float"),
    ],
)
def test_bad_hours_is_a_usage_error(tmp_path: Path, value: str, says: str) -> None:
    for command in ("check", "render"):
        proc = run(
            command,
            job(tmp_path, "rtx4090"),
            "--hours",
            value,
            *(["--out", str(tmp_path / "b")] if command == "render" else []),
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "--hours" in proc.stderr and says in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "b").exists()
