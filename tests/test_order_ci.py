"""Issue 37 item 4: the bundle README's CI workflow names the profile by a path relative to the checkout
(never the rendering machine's absolute path) and builds an image tag that Docker's reference grammar
accepts (before: ``envbuild/${{ matrix.profile }}`` from a path: ``envbuild//tmp/x/p.toml:h100``)."""

from __future__ import annotations

import re
from pathlib import Path

from cli_support import envbuild

from envbuild.render.ci import image_component, tag_word, workflow_ref

REPO = Path(__file__).resolve().parent.parent
# distribution/reference's grammar (reference/regexp.go): a repository path component and a tag
COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
TAG = r"[\w][\w.-]{0,127}"
REFERENCE = re.compile(rf"{COMPONENT}(?:/{COMPONENT})*:{TAG}")


def workflow(readme: str) -> str:
    return readme.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_an_absolute_profile_path_in_a_repository_is_relative_in_the_ci_snippet(tmp_path: Path) -> None:
    repo = tmp_path / "work" / "proj"
    (repo / ".git").mkdir(parents=True)  # a checkout's root, as actions/checkout makes it
    (repo / "envs").mkdir()
    profile = repo / "envs" / "Serve Job.toml"
    profile.write_text('name = "serve_job.v2"\nextends = "pytorch"\n', encoding="utf-8")
    out = tmp_path / "b"
    proc = envbuild("render", profile, "--target", "h100", "--out", out, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    flow = workflow((out / "README.md").read_text(encoding="utf-8"))
    assert str(tmp_path) not in flow
    assert '        profile: ["envs/Serve Job.toml"]\n' in flow
    assert '          - profile: "envs/Serve Job.toml"\n            image: serve_job.v2\n' in flow
    (tag,) = re.findall(r"TAG: (.+)", flow)
    assert tag == "envbuild/${{ matrix.image }}:${{ matrix.target }}"
    filled = tag.replace("${{ matrix.image }}", "serve_job.v2").replace("${{ matrix.target }}", "h100")
    assert REFERENCE.fullmatch(filled), filled
    assert "${{ matrix.profile }}" not in flow.split("steps:", 1)[1].replace(
        '"${{ matrix.profile }}" --target', ""
    )


def test_outside_a_repository_the_file_name_is_used() -> None:
    assert workflow_ref("/nowhere/at/all/envbuild-37/prof.toml") == "prof.toml"
    assert workflow_ref("profiles/x.toml") == "profiles/x.toml" and workflow_ref("pytorch") == "pytorch"


def test_every_profile_name_gives_a_valid_component_and_every_card_a_valid_tag() -> None:
    from envbuild.catalog import load_catalog

    for name in ("pytorch", "a..b", "x-", "a._b", "a__b", "a---b", "-.-", "train-llm.v2", "Z9"):
        assert re.fullmatch(COMPONENT, image_component(name)), name
    assert image_component("a..b") == "a-b" and image_component("a__b") == "a__b"
    for card in load_catalog().cards:
        assert re.fullmatch(TAG, tag_word(card.id)), card.id
