"""``extends``: merge semantics, provenance, cycles, depth, and path resolution across files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envbuild.errors import ProfileError
from envbuild.profile import load_profile

DATA = Path(__file__).parent / "data" / "profiles" / "project"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(DATA, tmp_path / "project")
    return tmp_path / "project"


def test_merge_semantics(project: Path) -> None:
    p = load_profile(str(project / "train.toml"))
    # scalars: nearest file wins; name/kind from the child, description inherited because absent
    assert (p.name, p.kind, p.description) == ("train-llm", "custom", "team defaults")
    assert (p.base.os, p.accelerator.backend, p.accelerator.version) == ("ubuntu22.04", "cuda", "12.6")
    # REPLACE lists
    assert p.accelerator.targets == ("b200",)
    # APPEND lists, parent first, exact duplicates removed
    assert p.python.packages == ("numpy==2.2.6", "rich>=13", "transformers==4.53.2")
    assert p.python.requirements == ("shared/team-reqs.txt", "reqs/locked.txt")  # rebased onto the folder
    assert p.system.apt == ("git", "curl", "git-lfs")
    assert p.validate_.extensions == ("apex", "flash_attn")
    assert p.torch.packages == ("torchvision",)
    # env by key
    assert p.env == {"HF_HOME": "/workspace/.cache/hf", "OMP_NUM_THREADS": "8"}
    # checks by name: "pilot" replaced in place, "extra" appended
    assert [(c.name, c.run) for c in p.checks] == [
        ("smoke", ("python", "-c", "import torch")),
        ("pilot", ("python", "src/pilot.py")),
        ("extra", ("python", "-V")),
    ]
    assert p.extends == "shared/base.toml"


def test_sources_record_origin_of_each_leaf(project: Path) -> None:
    s = load_profile(str(project / "train.toml")).sources
    assert s["name"] == "profile:train.toml"
    assert s["base.os"] == "extends:shared/base.toml"
    assert s["accelerator.targets"] == "profile:train.toml"
    assert s["python.packages"] == "extends:shared/base.toml, profile:train.toml"
    assert s["torch.packages"] == "extends:shared/base.toml"
    assert s["env.OMP_NUM_THREADS"] == "profile:train.toml"
    assert s["env.HF_HOME"] == "extends:shared/base.toml"
    assert s["checks.smoke"] == "extends:shared/base.toml"
    assert s["checks.pilot"] == "profile:train.toml"
    assert s["resources.gpus"] == "default"
    assert s["base.image"] == "default"


def test_requirement_files_resolve_against_declaring_file(project: Path) -> None:
    lines = load_profile(str(project / "train.toml")).python.lines
    origins = [line.origin for line in lines]
    assert origins[:3] == [
        "profile:python.packages[0]",
        "profile:python.packages[1]",
        "profile:python.packages[2]",
    ]
    assert origins[3] == "shared/team-reqs.txt:1"
    assert origins[4].startswith("reqs/locked.txt:")


def test_requirement_files_with_same_name_in_different_folders(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "reqs.txt").write_text("alpha==1\n")
    (tmp_path / "reqs.txt").write_text("beta==2\n")
    (tmp_path / "sub" / "base.toml").write_text(
        'name = "b"\nkind = "custom"\n[python]\nrequirements = ["reqs.txt"]\n'
    )
    child = 'name = "p"\nkind = "custom"\nextends = "sub/base.toml"\n'
    child += '[python]\nrequirements = ["reqs.txt", "sub/reqs.txt"]\n'
    (tmp_path / "p.toml").write_text(child)
    p = load_profile(str(tmp_path / "p.toml"))
    assert p.python.requirements == (
        "sub/reqs.txt",
        "reqs.txt",
    )  # the child's sub/reqs.txt is the parent's file
    assert [(line.text, line.origin) for line in p.python.lines] == [
        ("alpha==1", "sub/reqs.txt:1"),
        ("beta==2", "reqs.txt:1"),
    ]


def test_builtin_parent(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(
        'name = "mine"\nkind = "custom"\nextends = "pytorch"\n[torch]\nversion = "2.8.0"\n'
        '[python]\npackages = ["numpy==2.2.6", "scipy==1.16.0"]\n[accelerator]\ntargets = ["b200", "h100"]\n'
    )
    p = load_profile(str(tmp_path / "p.toml"))
    assert p.torch.version == "2.8.0"
    assert p.torch.packages == ("torchvision",)
    assert p.python.packages == ("numpy==2.2.6", "scipy==1.16.0")
    assert p.accelerator.targets == ("b200", "h100")
    assert p.sources["python.version"] == "extends:builtin:pytorch"
    assert p.path == str((tmp_path / "p.toml").resolve()) and p.folder == str(tmp_path.resolve())


def test_extending_builtin_custom_requires_own_app_source(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text('name = "mine"\nkind = "custom"\nextends = "custom"\n')
    with pytest.raises(ProfileError) as info:
        load_profile(str(tmp_path / "p.toml"))
    assert [i.key for i in info.value.issues] == ["app.source"]
    assert "builtin:custom" in info.value.issues[0].message
    (tmp_path / "p.toml").write_text(
        'name = "mine"\nkind = "custom"\nextends = "custom"\n[app]\nsource = "."\n'
    )
    assert load_profile(str(tmp_path / "p.toml")).app.source == "."


def test_inherited_app_source_is_rebased_onto_profile_folder(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "code").mkdir()
    (tmp_path / "base" / "b.toml").write_text('name = "b"\nkind = "custom"\n[app]\nsource = "code"\n')
    (tmp_path / "p.toml").write_text('name = "p"\nextends = "base/b.toml"\n')
    p = load_profile(str(tmp_path / "p.toml"))
    assert p.app.source == "base/code"
    assert p.kind == "custom"


@pytest.mark.parametrize(
    ("files", "chain"),
    [
        ({"a.toml": 'extends = "a.toml"'}, "a.toml -> a.toml"),
        ({"a.toml": 'extends = "b.toml"', "b.toml": 'extends = "a.toml"'}, "a.toml -> b.toml -> a.toml"),
        (
            {
                "a.toml": 'extends = "sub/b.toml"',
                "sub/b.toml": 'extends = "c.toml"',
                "sub/c.toml": 'extends = "b.toml"',
            },
            "a.toml -> sub/b.toml -> sub/c.toml -> sub/b.toml",
        ),
    ],
)
def test_cycles_are_errors_naming_the_chain(tmp_path: Path, files: dict[str, str], chain: str) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f'name = "x"\nkind = "custom"\n{text}\n')
    with pytest.raises(ProfileError) as info:
        load_profile(str(tmp_path / "a.toml"))
    assert [i.key for i in info.value.issues] == ["extends"]
    assert f"extends cycle: {chain}" in info.value.issues[0].message


def test_depth_limit(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"p{i}.toml").write_text(f'name = "p{i}"\nkind = "custom"\nextends = "p{i + 1}.toml"\n')
    (tmp_path / "p20.toml").write_text('name = "p20"\nkind = "custom"\n')
    with pytest.raises(ProfileError, match="deeper than 16"):
        load_profile(str(tmp_path / "p0.toml"))
    assert load_profile(str(tmp_path / "p10.toml")).name == "p10"


def test_errors_in_parent_name_the_parent_file(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text('name = "b"\nkind = "custom"\n[system]\napt = ["bad;name"]\n')
    (tmp_path / "p.toml").write_text(
        'name = "p"\nkind = "custom"\nextends = "base.toml"\n[env]\nAPI_TOKEN = "x"\n'
    )
    with pytest.raises(ProfileError) as info:
        load_profile(str(tmp_path / "p.toml"))
    found = {(Path(i.file).name, i.key) for i in info.value.issues}
    assert found == {("p.toml", "env.API_TOKEN"), ("base.toml", "system.apt[0]")}


def test_parent_symlink_escaping_folder(tmp_path: Path) -> None:
    (tmp_path / "outside.toml").write_text('name = "o"\nkind = "custom"\n')
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "base.toml").symlink_to(tmp_path / "outside.toml")
    (tmp_path / "proj" / "p.toml").write_text('name = "p"\nkind = "custom"\nextends = "base.toml"\n')
    with pytest.raises(ProfileError, match="outside the profile's folder"):
        load_profile(str(tmp_path / "proj" / "p.toml"))


def test_sha256_covers_parents_and_requirement_files(project: Path) -> None:
    first = load_profile(str(project / "train.toml")).sha256
    assert load_profile(str(project / "train.toml")).sha256 == first
    team = project / "shared" / "team-reqs.txt"
    team.write_text(team.read_text() + "# a comment changes the bytes\n")
    second = load_profile(str(project / "train.toml")).sha256
    assert second != first
    base = project / "shared" / "base.toml"
    base.write_text(base.read_text() + "\n")
    assert load_profile(str(project / "train.toml")).sha256 not in (first, second)


def test_path_objects_and_bom_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_bytes(b'\xef\xbb\xbfname = "p"\nkind = "custom"\n')
    assert load_profile(tmp_path / "p.toml").name == "p"


def test_sha256_does_not_depend_on_location(tmp_path: Path) -> None:
    shutil.copytree(DATA, tmp_path / "a")
    shutil.copytree(DATA, tmp_path / "elsewhere" / "b")
    one = load_profile(str(tmp_path / "a" / "train.toml"))
    two = load_profile(str(tmp_path / "elsewhere" / "b" / "train.toml"))
    assert one.sha256 == two.sha256
    assert one.sources == two.sources


@pytest.mark.parametrize(
    ("child", "files", "message"),
    [
        ('extends = "missing.toml"', {}, "does not exist"),
        ('extends = "bad.toml"', {"bad.toml": "kind = \n"}, "not valid TOML"),
        ('extends = "../bad.toml"', {}, "'..'"),
    ],
)
def test_broken_parent_does_not_cascade_into_missing_keys(
    tmp_path: Path, child: str, files: dict[str, str], message: str
) -> None:
    """A child without `kind` relies on its parent: when the parent cannot be read, report only that."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "p.toml").write_text(f'name = "p"\n{child}\n')
    with pytest.raises(ProfileError) as info:
        load_profile(str(tmp_path / "p.toml"))
    assert len(info.value.issues) == 1 and message in info.value.issues[0].message
