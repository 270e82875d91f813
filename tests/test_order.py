"""The order summary: `--days`, `--prices`, lots x lot price (never x cards), per-duration README table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from cli_support import envbuild

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return envbuild(*args, cwd=cwd)


def write_profile(tmp_path: Path, target: str, gpus: int, resources: str = "") -> Path:
    path = tmp_path / "job.toml"
    text = f'name = "job"\nextends = "pytorch"\n[accelerator]\ntargets = ["{target}"]\n'
    path.write_text(text + f"[resources]\ngpus = {gpus}\n{resources}", encoding="utf-8")
    return path


def order(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return list(json.loads(proc.stdout)["plan"]["order"])


def test_days_7_on_rtx4090_with_two_gpus_is_two_lots_times_110(tmp_path: Path) -> None:
    job = str(write_profile(tmp_path, "rtx4090", 2))
    (line,) = order(run("check", job, "--days", "7", "--json"))
    assert (line["card"], line["lots"], line["cards"]) == ("rtx4090", 2, 2)
    (price,) = line["prices"]
    assert (price["days"], price["usd_per_lot"], price["usd"]) == (7, 110.0, 220.0)
    assert price["source"] == "IteraGPU rate, provider guide, seeds/004_7dadecc1b5953b0a.txt"
    assert price["date"] == "2026-12"
    human = run("check", job, "--days", "7")
    assert "rtx4090: 2 lots, 2 cards; 7 days: 2 x 110.00 USD = 220.00 USD" in " ".join(human.stdout.split())


def test_no_days_prices_every_duration_as_the_guide_does(tmp_path: Path) -> None:
    # the guide's own example: two 3-day RTX 4090 lots = 94.28 USD
    (line,) = order(run("check", str(write_profile(tmp_path, "rtx4090", 2)), "--json"))
    assert [(p["days"], p["usd"]) for p in line["prices"]] == [(3, 94.28), (7, 220.0), (30, 780.0)]


def test_b200_lot_price_is_not_multiplied_by_cards(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    text = 'source = "IteraGPU order page"\ndate = 2026-12-15\n[b200]\n7 = 650.5\n'  # a TOML date
    prices.write_text(text, encoding="utf-8")
    job = str(write_profile(tmp_path, "b200", 4))
    (line,) = order(run("check", job, "--days", "7", "--prices", str(prices), "--json"))
    assert (line["lots"], line["cards"], line["idle_devices"]) == (2, 4, 0)
    (price,) = line["prices"]
    assert (price["usd_per_lot"], price["usd"]) == (650.5, 1301.0)  # 2 lots x 650.50, not 4 x
    assert (price["source"], price["date"]) == ("IteraGPU order page", "2026-12-15")


def test_bad_price_file_exit_2_names_file_and_keys(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('date = "last week"\n[b200]\n14 = 700\n7 = "cheap"\n[h1000]\n7 = 1\n', encoding="utf-8")
    proc = run("check", "pytorch", "--prices", str(prices))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Traceback" not in proc.stderr
    err = proc.stderr
    assert f"invalid price file {prices} (5 problems):" in err
    assert f"{prices}: source: expected a text saying where the prices come from" in err
    assert f"{prices}: date: expected YYYY-MM-DD or YYYY-MM, got 'last week'" in err
    assert f"{prices}: b200.14: not a rental duration in days; valid: 3, 7, 30" in err
    assert f"{prices}: b200.7: expected a positive number of USD per lot, got 'cheap'" in err
    assert f"{prices}: h1000: not a card id; valid: " in err and "b200" in err


def test_days_outside_the_provider_terms_exit_2() -> None:
    proc = run("check", "pytorch", "--days", "14")
    assert proc.returncode == 2
    assert "--days 14: IteraGPU rents for 3, 7, 30 days; valid: 3, 7, 30" in proc.stderr


def test_readme_shows_the_totals_per_duration_with_source(tmp_path: Path) -> None:
    job = write_profile(tmp_path, "rtx4090", 2)
    proc = run("render", str(job), "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "order: rtx4090: 2 lots, 2 cards; 3 days: 2 x 47.14 USD = 94.28 USD" in proc.stdout
    readme = (tmp_path / "b" / "README.md").read_text(encoding="utf-8")
    assert "- Duration: not chosen (`--days 3|7|30`): the prices below are per duration" in readme
    assert "| card | lots to order | cards | 3 days | 7 days | 30 days |" in readme
    assert (
        "| NVIDIA GeForce RTX 4090 | 2 | 2 | 2 x 47.14 USD = 94.28 USD | 2 x 110.00 USD = 220.00 USD | "
        "2 x 390.00 USD = 780.00 USD |"
    ) in readme
    assert "Prices from IteraGPU rate, provider guide, seeds/004\\_7dadecc1b5953b0a.txt (2026-12)." in readme
    seven = run("render", str(job), "--days", "7", "--out", str(tmp_path / "c"), cwd=tmp_path)
    assert seven.returncode == 0, seven.stderr
    text = (tmp_path / "c" / "README.md").read_text(encoding="utf-8")
    assert "- Duration: **7 days**" in text
    assert "| NVIDIA GeForce RTX 4090 | 2 | 2 | 2 x 110.00 USD = 220.00 USD |" in text
    assert "envbuild render job.toml --days 7" in text


def test_order_names_each_machines_host_and_driver_and_that_lots_are_separate_machines(
    tmp_path: Path,
) -> None:
    job = str(write_profile(tmp_path, "rtx4090", 2, "memory_gib = 64\ncpus = 8\n"))
    proc = run("check", job, "--json")
    (line,) = order(proc)
    floor = json.loads(proc.stdout)["plan"]["min_driver"]
    assert (line["host_memory_gib"], line["host_cpus"], line["min_driver"]) == (64, 8, floor) and floor
    assert line["separate_machines"] is True and "over the network, not NVLink" in line["across_lots"]
    human = " ".join(run("check", job).stdout.split())
    assert f"rtx4090: each machine: 64 GiB host memory, 8 CPUs, NVIDIA driver >= {floor}" in human
    # issue 37: the provider rents lots, not machines: never said as certain
    assert "rtx4090: the 2 lots may come as 2 separate machines" in human
    assert "a job across machines needs torch.distributed" in human
    assert "one server per lot (or a multi-node serving setup)" in human and "separate machines;" not in human
    render = run("render", job, "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert render.returncode == 0, render.stderr
    assert "order: rtx4090: the 2 lots may come as 2 separate machines" in render.stdout
    readme = (tmp_path / "b" / "README.md").read_text(encoding="utf-8")
    assert "- Each machine (lot) must give the container: **64 GiB host memory, 8 CPUs**" in readme
    assert "NVIDIA GeForce RTX 4090: the 2 lots may come as 2 separate machines" in readme


def test_one_lot_without_declared_resources_names_only_the_driver(tmp_path: Path) -> None:
    job = str(write_profile(tmp_path, "rtx4090", 1))
    (line,) = order(run("check", job, "--json"))
    assert (line["host_memory_gib"], line["host_cpus"], line["separate_machines"]) == (None, None, False)
    human = " ".join(run("check", job).stdout.split())
    assert "rtx4090: each machine: NVIDIA driver >= " in human and "separate machines" not in human
