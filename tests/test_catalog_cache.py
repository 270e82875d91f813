"""The per-user cache of validated catalog files (envbuild/catalog/cache.py) and of compiled templates.

A slot is used only when it carries the key of the bytes being loaded (and of the models and versions);
anything else -- another key, a truncated or corrupt slot, a slot others can write -- is a full
validation with the same result.  Every test points XDG_CACHE_HOME at its own tmp folder: nothing is
written to the real ~/.cache.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cli_support
import pytest
from cli_support import environ

import envbuild
from envbuild.boundary import to_data
from envbuild.catalog import cache, loader
from envbuild.catalog.blender_rows import BlenderCatalog
from envbuild.catalog.toolkit_rows import Toolkits
from envbuild.catalog.torch_rows import TorchCatalog
from envbuild.errors import CatalogError
from envbuild.plan.abi_data import AbiData
from envbuild.resources import cache_dir, catalog_dir

REPO = Path(__file__).resolve().parent.parent

PAIRS: list[tuple[str, type[Any]]] = [
    ("cards.toml", loader.CardsFile),
    ("torch.toml", TorchCatalog),
    ("toolkits.toml", Toolkits),
    ("platform.toml", loader.PlatformFile),
    ("blender.toml", BlenderCatalog),
    ("prices.toml", loader.PricesFile),
    ("abi.toml", AbiData),
]
CATALOG_FILES = [name for name, _ in PAIRS if name != "abi.toml"]


@pytest.fixture(autouse=True)
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    yield home / "envbuild"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(catalog_dir(), target)
    return target


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The file names validated in full (cache misses), in order."""
    seen: list[str] = []
    real: Callable[..., Any] = loader._validate

    def counting(path: Path, raw: bytes, model: type[Any]) -> Any:
        seen.append(path.name)
        return real(path, raw, model)

    monkeypatch.setattr(loader, "_validate", counting)
    return seen


def _slot(data: Path, name: str) -> Path:
    model = dict(PAIRS)[name]
    return cache.slot(data / name, model)


def test_cache_dir_follows_xdg(xdg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_dir() == xdg
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for unset in ("", "relative/cache"):  # the XDG spec: empty or relative values are ignored
        monkeypatch.setenv("XDG_CACHE_HOME", unset)
        assert cache_dir() == tmp_path / "home" / ".cache" / "envbuild"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == tmp_path / "home" / ".cache" / "envbuild"


def test_first_load_validates_then_the_cache_serves(data: Path, xdg: Path, validations: list[str]) -> None:
    first = loader.load_files(data)
    assert validations == CATALOG_FILES
    for name in CATALOG_FILES:
        slot = _slot(data, name)
        assert slot.parent == xdg / "catalog" and slot.is_file()
        if hasattr(os, "getuid"):
            assert not slot.stat().st_mode & 0o077  # this user's alone
    second = loader.load_files(data)
    assert validations == CATALOG_FILES  # nothing validated again
    assert second == first


@pytest.mark.parametrize(("name", "model"), PAIRS)
def test_cached_object_equals_full_validation(data: Path, name: str, model: type[Any]) -> None:
    path = data / name
    full = loader._validate(path, path.read_bytes(), model)
    loader._load(path, model)  # fills the slot
    cached = cache.load(path, model, cache.cache_key(path.read_bytes(), model))
    assert cached is not None and type(cached) is model
    assert cached == full
    assert to_data(cached) == to_data(full)


def test_changed_data_is_validated_again(data: Path, validations: list[str]) -> None:
    loader.load_files(data)
    path = data / "cards.toml"
    text = path.read_text(encoding="utf-8")
    assert "memory_gib = 141" in text
    path.write_text(text.replace("memory_gib = 141", "memory_gib = 142", 1), encoding="utf-8")
    del validations[:]
    cards = loader.load_files(data)[0]
    assert validations == ["cards.toml"]  # only the changed file
    assert next(c for c in cards.card if c.id == "h200").memory_gib == 142


def test_a_malformed_file_fails_the_same_with_a_warm_cache(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader.load_files(data)  # every slot warm with the good data
    path = data / "cards.toml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('arch = "sm_90"', 'arch = "hopper"', 1), encoding="utf-8")
    with pytest.raises(CatalogError) as warm:
        loader.load_files(data)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    with pytest.raises(CatalogError) as cold:
        loader.load_files(data)
    assert str(warm.value) == str(cold.value)
    assert "card[5] (id 'h100'): arch" in str(warm.value)


def _pickled(obj: object) -> bytes:
    return pickle.dumps(obj, protocol=cache.PROTOCOL)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda blob, key: blob.replace(key, key[::-1], 1), id="another-key"),
        pytest.param(lambda blob, key: blob[: len(blob) // 2], id="truncated-pickle"),
        pytest.param(lambda blob, key: blob[: len(cache.FORMAT) + 10], id="truncated-header"),
        pytest.param(lambda blob, key: b"", id="empty"),
        pytest.param(lambda blob, key: cache.FORMAT + key + b"\n" + b"\x80\x05garbage", id="garbage"),
        pytest.param(lambda blob, key: cache.FORMAT + key + b"\n" + _pickled({"card": []}), id="wrong-type"),
        pytest.param(
            lambda blob, key: b"envbuild-catalog-cache/0\n" + blob[len(cache.FORMAT) :], id="format"
        ),
    ],
)
def test_a_stale_or_corrupt_slot_means_full_validation(
    data: Path, validations: list[str], damage: Callable[[bytes, bytes], bytes]
) -> None:
    first = loader.load_files(data)
    slot = _slot(data, "torch.toml")
    key = cache.cache_key((data / "torch.toml").read_bytes(), TorchCatalog)
    good = slot.read_bytes()
    assert good.startswith(cache.FORMAT + key + b"\n")
    slot.write_bytes(damage(good, key))
    del validations[:]
    again = loader.load_files(data)
    assert validations == ["torch.toml"]
    assert again == first
    assert slot.read_bytes() == good  # written again, whole
    del validations[:]
    loader.load_files(data)
    assert validations == []


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX ownership and modes")
def test_a_slot_others_can_write_is_not_trusted(data: Path, validations: list[str]) -> None:
    loader.load_files(data)
    slot = _slot(data, "blender.toml")
    slot.chmod(0o666)
    del validations[:]
    loader.load_files(data)
    assert validations == ["blender.toml"]


def test_the_key_covers_versions_and_models(monkeypatch: pytest.MonkeyPatch, data: Path) -> None:
    raw = (data / "torch.toml").read_bytes()
    key = cache.cache_key(raw, TorchCatalog)
    assert key != cache.cache_key(raw + b"\n", TorchCatalog)
    assert key != cache.cache_key(raw, Toolkits)
    for patch in (
        lambda: monkeypatch.setattr(envbuild, "__version__", "0.0.0-other"),
        lambda: monkeypatch.setattr(cache, "_module_digest", lambda name: b"another source"),
    ):
        cache.schema_fingerprint.cache_clear()
        patch()
        try:
            assert cache.cache_key(raw, TorchCatalog) != key
        finally:
            monkeypatch.undo()
            cache.schema_fingerprint.cache_clear()
    assert cache.cache_key(raw, TorchCatalog) == key


def test_the_key_covers_every_row_module() -> None:
    """Every module defining catalog rows is in the key: a change to a row's checks is a miss."""
    row_modules = {
        f"envbuild.catalog.{path.stem}"
        for path in (REPO / "envbuild" / "catalog").glob("*.py")
        if path.stem == "rows" or path.stem.endswith("_rows")
    }
    assert row_modules <= set(cache.MODEL_MODULES)
    assert "envbuild.catalog.rows" in row_modules


def test_an_unwritable_cache_only_costs_time(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validations: list[str]
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    first = loader.load_files(data)
    second = loader.load_files(data)
    assert first == second
    assert validations == CATALOG_FILES * 2
    assert blocker.read_text(encoding="utf-8") == ""


# ---- the command line, in fresh processes -----------------------------------------------------------


def _envbuild(
    xdg_home: Path, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = environ(XDG_CACHE_HOME=str(xdg_home), **(extra_env or {}))
    return cli_support.envbuild(*args, env=env, cwd=REPO)


def test_check_gives_the_same_plan_cold_warm_and_with_a_corrupt_cache(xdg: Path) -> None:
    home = xdg.parent
    outputs = []
    for _ in range(2):
        proc = _envbuild(home, "check", "pytorch", "--json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs.append(proc.stdout)
    slots = sorted(p.name for p in (xdg / "catalog").iterdir())
    assert [s.split(".pickle")[0].split(".toml")[0] for s in slots] == sorted(
        n.removesuffix(".toml") for n, _ in PAIRS
    )
    for slot in (xdg / "catalog").iterdir():
        slot.write_bytes(slot.read_bytes()[:100])
    proc = _envbuild(home, "check", "pytorch", "--json")
    outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    assert json.loads(outputs[0])["plan"]["profile"]["name"] == "pytorch"


def test_render_gives_the_same_bundle_with_compiled_templates_cached(xdg: Path, tmp_path: Path) -> None:
    home = xdg.parent

    def bundle(name: str) -> dict[str, bytes]:
        out = tmp_path / name
        proc = _envbuild(home, "render", "pytorch", "--out", str(out), "--force")
        assert proc.returncode == 0, proc.stderr[-2000:]
        return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}

    cold = bundle("cold")
    compiled = list((xdg / "jinja").rglob("*.cache"))
    assert compiled, "render stores its compiled templates"
    warm = bundle("warm")
    for path in compiled:
        path.write_bytes(path.read_bytes()[:40])  # corrupt every compiled template
    corrupt = bundle("corrupt")
    assert cold == warm == corrupt
