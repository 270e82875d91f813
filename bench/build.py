"""Measure image builds of the built-in ``pytorch-cpu`` bundle with the real engine.

Prints: the cold build time (``--no-cache``), the warm rebuild with nothing changed, the rebuild
when only ``app/`` changed, the image size next to a naive single-stage Dockerfile installing
the same packages from the same wheelhouse, and the rebuild proof's costs: writing a build record
(``docker save`` stream -> every path's sha256) and comparing two records (``envbuild image diff``).
Then, on arrival: ``envbuild validate --image`` on the built image, each run in a fresh container as a
renter's is (the extensions stage's time, and the whole run's), and the compilers the final image
carries (issue 27 item 6: the stage at most 5 s on 2 CPUs, no compiler unless asked for).
Images are tagged with a random suffix and removed.

    PIP_RETRIES=0 .venv/bin/python bench/build.py [--base-image envbuild/debian:12] [--keep]
        [--index-url URL]... [--find-links DIR]...

The bundle is locked from its own indexes unless ``--index-url`` / ``--find-links`` are given; where
the PyTorch index is unreachable (these machines), use the tests' stand-ins:
``--index-url https://pypi.org/simple --find-links /opt/wheels``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import suppress
from pathlib import Path

from envbuild.image.build import BuildResult, build_image
from envbuild.image.diff import diff_files
from envbuild.image.engine import docker_client
from envbuild.image.fetch import fetch
from envbuild.image.record import Record
from envbuild.image.recording import record_image

NAIVE_DOCKERFILE = """\
# The naive way: one stage, the wheelhouse copied in, tools left installed, pip's defaults.
ARG BASE_IMAGE=debian:12
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y python3 python3-venv python3-dev g++ ca-certificates
COPY . /src
RUN python3 -m venv /opt/venv \\
 && /opt/venv/bin/pip install --no-index --find-links /src/wheelhouse -r /src/requirements-rebuild.txt
WORKDIR /src/app
"""


def render(out: Path) -> Path:
    bundle = out / "pytorch-cpu"
    subprocess.run(
        [sys.executable, "-m", "envbuild", "render", "pytorch-cpu", "--out", str(bundle)],
        check=True,
        capture_output=True,
    )
    return bundle


def size_mb(client: object, tag: str) -> float:
    image = client.images.get(tag)  # type: ignore[attr-defined]
    return float(image.attrs["Size"]) / 1e6


def layers(client: object, tag: str) -> int:
    image = client.images.get(tag)  # type: ignore[attr-defined]
    return len(image.attrs["RootFS"]["Layers"])


def line(label: str, result: BuildResult) -> str:
    return f"{label:<34} {result.seconds:8.1f} s   ({result.cached_steps}/{len(result.steps)} steps cached)"


def timed_record(client: object, tag: str, bundle: Path, base: str, results: list[str], label: str) -> Record:
    api = client.api  # type: ignore[attr-defined]
    started = time.monotonic()
    record = record_image(api, tag, bundle=bundle, base_image=base)
    seconds = time.monotonic() - started
    results.append(
        f"{label:<34} {seconds:8.1f} s   ({len(record.files.entries)} paths of a "
        f"{size_mb(client, tag):.0f} MB image, from the docker save stream)"
    )
    return record


def on_arrival(tag: str, results: list[str], runs: int = 2) -> None:
    """``envbuild validate --image`` ``runs`` times (a fresh container each), and the compilers on PATH."""
    import json

    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix="envbuild-bench-validate-") as out:
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "envbuild", "validate", "--image", tag, "--out", out, "--json"],
                capture_output=True,
                text=True,
                check=False,
            )
            wall = time.monotonic() - started
        try:
            report = json.loads(proc.stdout)["report"]
        except (ValueError, KeyError):
            results.append(
                f"validate --image run {i + 1}: no report (exit {proc.returncode}): {proc.stderr[-300:]}"
            )
            continue
        ext = next((s for s in report["stages"] if s["stage"] == "extensions"), None)
        parts = ", ".join(
            f"{p['name']} {p['status']} ({p.get('source', '-')})"
            for p in (ext or {}).get("facts", {}).get("parts", [])
        )
        verdict = "ok" if report["ok"] else "FAILED"
        results.append(
            f"{'validate --image, run ' + str(i + 1):<34} {wall:8.1f} s   ({verdict}; "
            f"extensions stage {ext['duration_s'] if ext else float('nan'):.2f} s: {parts})"
        )
    probe = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--entrypoint",
            "bash",
            tag,
            "-c",
            "for c in cc gcc g++ c++ nvcc ninja; do command -v $c; done; true",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    found = " ".join(probe.stdout.split()) or "none"
    results.append(f"{'compilers in the final image':<34} {found}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--base-image", default=os.environ.get("ENVBUILD_TEST_BASE_IMAGE", "envbuild/debian:12")
    )
    parser.add_argument("--keep", action="store_true", help="keep the images")
    parser.add_argument("--index-url", action="append", default=[], help="lock against this index instead")
    parser.add_argument("--find-links", action="append", default=[], help="a folder of wheels to lock from")
    args = parser.parse_args()
    client = docker_client()
    suffix = uuid.uuid4().hex[:10]
    tag, naive_tag = f"envbuild-bench/pytorch-cpu:{suffix}", f"envbuild-bench/naive:{suffix}"
    results: list[str] = []
    with tempfile.TemporaryDirectory(prefix="envbuild-bench-") as tmp:
        bundle = render(Path(tmp))
        started = time.monotonic()
        fetched = fetch(bundle, index_urls=tuple(args.index_url), find_links=tuple(args.find_links))
        results.append(
            f"{'fetch (wheelhouse + tools)':<34} {time.monotonic() - started:8.1f} s   "
            f"({len(fetched.wheels)} wheels, {len(fetched.tools)} tool wheels)"
        )
        try:
            cold = build_image(bundle, tag, base_image=args.base_image, no_cache=True, progress=False)
            results.append(line("cold build (--no-cache)", cold))
            for step in cold.steps:
                if step.seconds >= 5:
                    results.append(
                        f"    cold step {step.number:>2}: {step.seconds:6.1f} s  {step.instruction[:60]}"
                    )
            # The classic builder picks the first cached image whose parent and instruction match; after a
            # --no-cache build there can be two such chains, so the first warm rebuild may miss.  Both
            # rebuilds are reported.
            record_cold = timed_record(client, tag, bundle, args.base_image, results, "record the cold build")
            warm = build_image(bundle, tag, base_image=args.base_image, progress=False)
            results.append(line("warm rebuild, nothing changed", warm))
            warm = build_image(bundle, tag, base_image=args.base_image, progress=False)
            results.append(line("warm rebuild again", warm))
            app = bundle / "app" / "bench-touch.txt"
            app.write_text(f"changed {suffix}\n")
            changed = build_image(bundle, tag, base_image=args.base_image, progress=False)
            results.append(line("rebuild, only app/ changed", changed))
            record_app = timed_record(
                client, tag, bundle, args.base_image, results, "record the app/ rebuild"
            )
            started = time.monotonic()
            diff = diff_files(record_cold.files, record_app.files)
            results.append(
                f"{'diff two records':<34} {time.monotonic() - started:8.2f} s   "
                f"({len(record_cold.files.entries)} vs {len(record_app.files.entries)} paths; "
                f"{diff.counts()['content']} content, {diff.counts()['package']} package difference(s))"
            )
            naive_dir = Path(tmp) / "naive"
            naive_dir.mkdir()
            shutil.copy2(bundle / "requirements-rebuild.txt", naive_dir)
            shutil.copytree(bundle / "wheelhouse", naive_dir / "wheelhouse")
            shutil.copytree(bundle / "app", naive_dir / "app")
            (naive_dir / "Dockerfile").write_text(NAIVE_DOCKERFILE)
            started = time.monotonic()
            proc = subprocess.run(
                [
                    "docker",
                    "build",
                    "-q",
                    "--build-arg",
                    f"BASE_IMAGE={args.base_image}",
                    "-t",
                    naive_tag,
                    ".",
                ],
                cwd=naive_dir,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                return 1
            naive_seconds = time.monotonic() - started
            results.append(f"{'naive single-stage build':<34} {naive_seconds:8.1f} s")
            ours, naive = size_mb(client, tag), size_mb(client, naive_tag)
            for label, name, size in (
                ("envbuild (multi-stage)", tag, ours),
                ("naive single-stage", naive_tag, naive),
            ):
                results.append(
                    f"{'image size, ' + label:<34} {size:8.0f} MB   ({layers(client, name)} layers)"
                )
            results.append(
                f"{'saved':<34} {naive - ours:8.0f} MB   ({100 * (naive - ours) / naive:.0f} %; "
                f"{ours / naive:.2f}x the naive image)"
            )
            on_arrival(tag, results)
        finally:
            if not args.keep:
                for name in (tag, naive_tag):
                    with suppress(Exception):  # absent when a build failed
                        client.images.remove(name, force=True)
    print(f"envbuild build bench: pytorch-cpu on {args.base_image} ({os.cpu_count()} CPUs)")
    for text in results:
        print("  " + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
