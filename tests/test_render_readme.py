"""The bundle README: what to order (lots, cards, memory, driver), run flags per vendor, provenance."""

from __future__ import annotations

from render_support import B200, H100, cpu_plan, cuda_plan, profile, result, rocm_plan

from envbuild.catalog.order import lots_needed
from envbuild.models import Finding, ResourcesSpec
from envbuild.render.readme import render_readme

COMMAND = "envbuild render train --target b200 --out b"


def test_lots_round_up_to_whole_lots() -> None:
    assert [lots_needed(g, 2) for g in (1, 2, 3, 4, 5)] == [1, 1, 2, 2, 3]
    assert [lots_needed(g, 1) for g in (1, 3)] == [1, 3]


def test_order_table_for_a_two_card_lot() -> None:
    prof = profile(resources=ResourcesSpec(gpus=3, gpu_memory_gib=100))
    text = render_readme(result(cuda_plan(profile=prof, targets=(H100, B200))), COMMAND)
    assert "- Preparation: **PyTorch**" in text
    assert (
        "- GPU devices the job uses at once (`resources.gpus`): 3; peak memory need per device: 100 GiB"
        in text
    )
    assert "- Minimum NVIDIA driver on the host: **570.124.06**" in text
    assert "| NVIDIA H100 SXM | nvidia | sm_90 | 1 | 1 | 80 GiB | 80 GiB | 3 | 3 | 3 | 240 GiB |" in text
    assert "| NVIDIA B200 | nvidia | sm_100 | 2 | 1 | 180 GiB | 360 GiB | 2 | 4 | 4 | 720 GiB |" in text
    assert "Cards do not pool memory" in text


def test_run_flags_per_vendor() -> None:
    nvidia = render_readme(result(cuda_plan()), COMMAND)
    assert "docker run --rm -it \\\n  --gpus all \\\n  --ipc=host" in nvidia and "/dev/kfd" not in nvidia
    assert "envbuild validate --image envbuild/train:" in nvidia
    amd = render_readme(result(rocm_plan()), COMMAND)
    # the host's group ids of the nodes, read on the host that runs the command (never "video")
    assert '--device /dev/kfd \\\n  --device /dev/dri \\\n  --group-add "$(stat -c %g /dev/kfd)"' in amd
    assert "--group-add video" not in amd and "--gpus" not in amd
    assert "- ROCm 6.3, torch 2.7.1+rocm6.3" in amd
    cpu = render_readme(result(cpu_plan()), COMMAND)
    assert "No GPU: this environment runs on the CPU" in cpu
    assert "--gpus" not in cpu and "/dev/kfd" not in cpu


def test_preparation_for_each_kind() -> None:
    for kind, label in [("ubuntu", "Ubuntu"), ("blender", "Blender"), ("custom", "Custom image")]:
        text = render_readme(result(cuda_plan(profile=profile(kind=kind))), COMMAND)
        assert f"- Preparation: **{label}**" in text


def test_findings_sorted_and_escaped_and_provenance() -> None:
    findings = (
        Finding(severity="info", code="I-DRIVER-UNKNOWN", message="order a driver >= 570"),
        Finding(severity="warning", code="W-X", message="<script>alert(1)</script> [x](http://e)"),
        Finding(severity="info", code="I-ARCH-COMPAT", message="runs sm_80", source="a100: sheet #2 | *x*"),
    )
    text = render_readme(result(cuda_plan(), *findings), COMMAND)
    rows = [line for line in text.splitlines() if line.startswith(("| warning", "| info"))]
    assert rows == [
        "| warning | `W-X` | \\<script\\>alert(1)\\</script\\> \\[x\\](http://e) |  |",
        "| info | `I-ARCH-COMPAT` | runs sm\\_80 | [1] |",
        "| info | `I-DRIVER-UNKNOWN` | order a driver \\>= 570 |  |",
    ]
    assert "\n1. a100: sheet \\#2 \\| \\*x\\*\n" in text  # the source, escaped, under the table
    assert "| `base.os` | `default` |" in text
    assert "| `python.version` | `profile:train.toml` |" in text


def test_findings_about_this_machine_stay_out_of_the_bundle() -> None:
    overlay = "/home/someone/.local/share/envbuild/catalog-overlay.json"
    findings = (
        Finding(severity="info", code="I-OVERLAY", message=f"the catalog overlay {overlay} (3 days old)"),
        Finding(
            severity="warning", code="W-OVERLAY-UNCONFIRMED", message="torch 2.16.0 comes from the overlay"
        ),
    )
    text = render_readme(result(cuda_plan(), *findings), COMMAND)
    assert overlay not in text and "days old" not in text
    assert "W-OVERLAY-UNCONFIRMED" in text


def test_description_markdown_is_neutralised() -> None:
    text = render_readme(result(cuda_plan(profile=profile(description="# Big | *bold*"))), COMMAND)
    assert "\\# Big \\| \\*bold\\*" in text


def test_blender_readme_shows_headless_device_selection() -> None:
    plan = cuda_plan(
        profile=profile(kind="blender", blender={"version": "4.5.3", "devices": ["OPTIX", "CUDA"]}),
        blender_version="4.5.3",
        blender_url="https://download.blender.org/release/Blender4.5/blender-4.5.3-linux-x64.tar.xz",
        blender_sha256_url="https://download.blender.org/release/Blender4.5/blender-4.5.3.sha256",
    )
    text = render_readme(result(plan), COMMAND)
    assert "blender -b scene.blend -E CYCLES -o //out_#### -f 1 -- --cycles-device OPTIX" in text
    assert "Blender 4.5.3, devices OPTIX, CUDA, at `/opt/blender`" in text
    assert "--cycles-device" not in render_readme(result(cuda_plan()), COMMAND)
