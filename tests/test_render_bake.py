"""``render --bake``: a docker-bake.hcl that BuildKit's HCL reads (parsed here with python-hcl2, since
this machine's engine has no buildx), naming the bundle's Dockerfile, tag, base and SOURCE_DATE_EPOCH."""

from __future__ import annotations

from pathlib import Path

import hcl2
from build_support import envbuild

from envbuild.render.bake import hcl_str


def unquote(value: str) -> str:
    return value[1:-1] if value.startswith('"') and value.endswith('"') else value


def test_bake_file_parses_and_matches_the_bundle(tmp_path: Path) -> None:
    out = tmp_path / "b"
    proc = envbuild("render", "pytorch", "--target", "h100", "--target", "h200", "--bake", "--out", out)
    assert proc.returncode == 0, proc.stderr
    data = hcl2.loads((out / "docker-bake.hcl").read_text(encoding="utf-8"))
    variables = {unquote(k): unquote(v["default"]) for block in data["variable"] for k, v in block.items()}
    dockerfile = (out / "Dockerfile").read_text(encoding="utf-8")
    assert f'ARG BASE_IMAGE="{variables["BASE_IMAGE"]}"' in dockerfile
    assert f"ARG SOURCE_DATE_EPOCH={variables['SOURCE_DATE_EPOCH']}" in dockerfile
    ((name, target),) = data["target"][0].items()
    assert unquote(name) == "pytorch-h100-h200"
    assert [unquote(t) for t in data["group"][0]['"default"']["targets"]] == ["pytorch-h100-h200"]
    assert unquote(target["dockerfile"]) == "Dockerfile" and unquote(target["context"]) == "."
    assert "--bake" in dockerfile.split("# Regenerate: ", 1)[1].splitlines()[0]
    again = envbuild("render", "pytorch", "--target", "h100", "--target", "h200", "--out", out)
    assert again.returncode == 0 and not (out / "docker-bake.hcl").exists()  # render owns it


def test_hcl_strings_never_interpolate() -> None:
    assert hcl_str('a${b}%{c}"\\') == '"a$${b}%%{c}\\"\\\\"'
    assert "${" not in hcl_str("${x}").replace("$${", "")
