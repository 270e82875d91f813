"""A value inherited through ``extends`` is named as inherited, with the profile it came from.

The loader records which file set each key (``Profile.origins``); the planner's messages name the
key as the user would write it and, when a parent set it, ``(inherited from profile 'NAME')``.
Children here extend the built-in ``pytorch`` profile (its values are read from it, not copied) or a
parent file written in the test.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from envbuild.models import CheckResult, Lock, Origin
from envbuild.plan import check
from envbuild.profile import load_profile

PYTORCH = "(inherited from profile 'pytorch')"


def _child(tmp_path: Path, body: str, name: str = "child") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\nkind = "pytorch"\nextends = "pytorch"\n{body}', encoding="utf-8")
    return path


def _messages(result: CheckResult, code: str) -> list[str]:
    found = [f.message for f in result.findings if f.code == code]
    assert found, (code, [(f.code, f.message) for f in result.findings])
    return found


def test_origins_name_the_profile_and_file_that_set_each_key(tmp_path: Path) -> None:
    child = load_profile(_child(tmp_path, '[torch]\npackages = ["torchaudio"]\n[python]\nversion = "3.11"\n'))
    parent = Origin(profile="pytorch", file="builtin:pytorch", inherited=True)
    own = Origin(profile="child", file="child.toml", inherited=False)
    for key in (
        "accelerator.backend",
        "accelerator.version",
        "accelerator.targets",
        "base.os",
        "torch.version",
    ):
        assert child.origins[key] == parent, key
        assert child.inherited(key) == parent
    assert child.origins["python.version"] == own and child.inherited("python.version") is None
    # appended lists: each entry keeps its own origin (the parent's torchvision, the child's torchaudio)
    assert child.torch.packages == ("torchvision", "torchaudio")
    assert child.inherited("torch.packages[0]") == parent
    assert child.inherited("torch.packages[1]") is None and child.origins["torch.packages[1]"] == own
    # defaults have no origin; the profile itself has none inherited
    assert "base.image" not in child.origins and child.inherited("base.image") is None
    assert not any(o.inherited for o in load_profile("pytorch").origins.values())
    assert parent.note() == "inherited from profile 'pytorch'"
    # origins are for messages only: the lock carries `sources`, never origins
    assert "origins" not in {f.name for f in fields(Lock)}


def test_a_parent_file_is_named_with_its_name_and_file(tmp_path: Path) -> None:
    """torch.version and base.os from a parent file; the OS the child sets itself is not "inherited"."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "base.toml").write_text(
        'name = "team-base"\nkind = "pytorch"\n[base]\nos = "ubuntu24.04"\n'
        '[accelerator]\nbackend = "cuda"\nversion = "11.8"\ntargets = ["h100"]\n'
        '[python]\nversion = "3.12"\n[torch]\nversion = "2.7"\n'
        "[validate]\ncompile_extensions = true\n",  # nvcc in the final image: the devel image is needed
        encoding="utf-8",
    )
    child = tmp_path / "train.toml"
    child.write_text('name = "train"\nkind = "custom"\nextends = "shared/base.toml"\n', encoding="utf-8")
    result = check(load_profile(child))
    note = "(inherited from profile 'team-base' (shared/base.toml))"
    (patch,) = _messages(result, "I-TORCH-PATCH")
    assert patch.startswith(f'torch.version = "2.7" {note} names a series: installing 2.7.1')
    (base,) = _messages(result, "E-BASE-UNAVAILABLE")
    assert f'base.os = "ubuntu24.04" {note}' in base and "set base.os to one of" in base
    # the same OS written in the child itself: named, not inherited
    own_keys = '[base]\nos = "ubuntu24.04"\n[validate]\ncompile_extensions = true\n'
    child.write_text(child.read_text() + own_keys, encoding="utf-8")
    (own,) = _messages(check(load_profile(child)), "E-BASE-UNAVAILABLE")
    assert '(base.os = "ubuntu24.04"; the image exists for ubuntu22.04)' in own and "inherited" not in own


def test_rocm_child_of_pytorch_names_the_inherited_version_and_targets(tmp_path: Path) -> None:
    """The issue's case: the CUDA version and the NVIDIA target both come from pytorch."""
    parent = load_profile("pytorch")
    version, (target,) = parent.accelerator.version, parent.accelerator.targets
    result = check(load_profile(_child(tmp_path, '[accelerator]\nbackend = "rocm"\n')))
    (ignored,) = _messages(result, "I-VERSION-INHERITED")
    assert ignored.startswith(f'accelerator.version = "{version}" {PYTORCH} is not a ROCm version')
    (vendor,) = _messages(result, "E-VENDOR-MISMATCH")
    assert vendor.startswith('accelerator.backend = "rocm" needs an AMD card')  # set by the child itself
    assert f'(accelerator.targets = ["{target}"] {PYTORCH})' in vendor
    # targets given with --target are not the inherited ones
    (cli,) = _messages(
        check(load_profile(_child(tmp_path, '[accelerator]\nbackend = "rocm"\n')), ["h200"]),
        "E-VENDOR-MISMATCH",
    )
    assert "(--target h200)" in cli and "accelerator.targets" not in cli


def test_inherited_backend_on_the_childs_amd_target(tmp_path: Path) -> None:
    result = check(load_profile(_child(tmp_path, '[accelerator]\ntargets = ["mi300x"]\n')))
    (vendor,) = _messages(result, "E-VENDOR-MISMATCH")
    assert vendor.startswith(f'accelerator.backend = "cuda" {PYTORCH} needs an NVIDIA card, but AMD')
    assert 'accelerator.targets = ["mi300x"])' in vendor and 'set accelerator.backend = "rocm"' in vendor


def test_inherited_python_version_on_the_childs_os(tmp_path: Path) -> None:
    python = load_profile("pytorch").python.version
    result = check(load_profile(_child(tmp_path, '[base]\nos = "debian12"\n')))
    (provision,) = _messages(result, "E-PYTHON-OS")
    assert provision.startswith(f'python.version = "{python}" {PYTORCH} cannot be provisioned on Debian 12')
    assert '(base.os = "debian12")' in provision and "set python.version to one of" in provision


def test_inherited_cuda_version_a_torch_release_does_not_publish(tmp_path: Path) -> None:
    version = load_profile("pytorch").accelerator.version
    result = check(load_profile(_child(tmp_path, '[torch]\nversion = "2.5.1"\n')))
    (variant,) = _messages(result, "E-VARIANT-UNAVAILABLE")
    assert f'(accelerator.version = "{version}" {PYTORCH})' in variant
    assert "Set accelerator.version to one of" in variant


def test_a_chain_names_the_profile_that_set_the_key_not_the_nearest_parent(tmp_path: Path) -> None:
    """child -> mid.toml -> pytorch: the version comes from pytorch, python.version from mid."""
    (tmp_path / "mid.toml").write_text(
        'name = "mid"\nkind = "pytorch"\nextends = "pytorch"\n[python]\nversion = "3.9"\n', encoding="utf-8"
    )
    child = tmp_path / "leaf.toml"
    child.write_text('name = "leaf"\nkind = "pytorch"\nextends = "mid.toml"\n[base]\nos = "debian12"\n')
    prof = load_profile(child)
    assert prof.inherited("accelerator.version") == Origin(
        profile="pytorch", file="builtin:pytorch", inherited=True
    )
    assert prof.inherited("python.version") == Origin(profile="mid", file="mid.toml", inherited=True)
    (provision,) = _messages(check(prof), "E-PYTHON-OS")
    assert provision.startswith("python.version = \"3.9\" (inherited from profile 'mid' (mid.toml)) cannot")
