"""The catalog: every row typed and sourced, facts as compat-facts states them, malformed rows rejected."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envbuild.catalog import load_catalog
from envbuild.errors import CatalogError
from envbuild.resources import catalog_dir


@pytest.fixture(scope="module")
def cat():  # type: ignore[no-untyped-def]
    return load_catalog()


def test_load_is_cached(cat) -> None:  # type: ignore[no-untyped-def]
    assert load_catalog() is cat


def test_every_row_has_source_and_tier(cat) -> None:  # type: ignore[no-untyped-def]
    rows = [
        *cat.cards,
        *cat.reserves,
        cat.terms,
        *cat.prices,
        *cat.toolkits.cuda,
        *cat.toolkits.rocm,
        *cat.toolkits.family,
        *cat.oses,
        *cat.blender.series,
    ]
    for rel in cat.releases:
        rows += [rel, *rel.patch, *rel.cuda, *rel.rocm]
    assert len(rows) > 100
    for row in rows:
        assert row.tier in {"P", "S", "unconfirmed"}
        assert len(row.source) > 10, row


@pytest.mark.parametrize(
    ("card", "vendor", "arch", "memory", "per_lot"),
    [
        ("rtx4090", "nvidia", "sm_89", 24, 1),
        ("rtx5090", "nvidia", "sm_120", 32, 1),
        ("l40s", "nvidia", "sm_89", 48, 1),
        ("a100-40gb", "nvidia", "sm_80", 40, 1),
        ("a100-80gb", "nvidia", "sm_80", 80, 1),
        ("h100", "nvidia", "sm_90", 80, 1),
        ("h100-pcie", "nvidia", "sm_90", 80, 1),
        ("h200", "nvidia", "sm_90", 141, 1),
        ("b200", "nvidia", "sm_100", 180, 2),
        ("mi250x", "amd", "gfx90a", 128, 1),
        ("mi300x", "amd", "gfx942", 192, 1),
        ("mi325x", "amd", "gfx942", 256, 1),
        ("cpu", "cpu", "", 0, 1),
    ],
)
def test_cards(cat, card, vendor, arch, memory, per_lot) -> None:  # type: ignore[no-untyped-def]
    row = cat.card(card)
    assert (row.vendor, row.arch, row.memory_gib, row.cards_per_lot) == (vendor, arch, memory, per_lot)
    assert row.card.id == card  # converts to the shared models.Card


# compat-facts §1 table: (release, CUDA variants on the index, PyPI default, ROCm variants, python range)
RELEASES = [
    ("2.1.2", {"cu118", "cu121"}, "cu121", {"rocm5.5", "rocm5.6"}, ("3.8", "3.11")),
    ("2.4.1", {"cu118", "cu121", "cu124"}, "cu121", {"rocm6.0", "rocm6.1"}, ("3.8", "3.12")),
    ("2.5.1", {"cu118", "cu121", "cu124"}, "cu124", {"rocm6.1", "rocm6.2"}, ("3.9", "3.13")),
    ("2.6.0", {"cu118", "cu124", "cu126"}, "cu124", {"rocm6.1", "rocm6.2.4"}, ("3.9", "3.13")),
    ("2.7.1", {"cu118", "cu126", "cu128"}, "cu126", {"rocm6.2.4", "rocm6.3"}, ("3.9", "3.13")),
    ("2.8.0", {"cu126", "cu128", "cu129"}, "cu128", {"rocm6.3", "rocm6.4"}, ("3.9", "3.13")),
    ("2.9.1", {"cu126", "cu128", "cu129", "cu130"}, "cu128", {"rocm6.3", "rocm6.4"}, ("3.10", "3.14")),
    ("2.11.0", {"cu126", "cu128", "cu129", "cu130"}, "cu130", {"rocm7.1", "rocm7.2"}, ("3.10", "3.14")),
    ("2.12.0", {"cu126", "cu130", "cu132"}, "cu130", {"rocm7.1", "rocm7.2"}, ("3.10", "3.14")),
    ("2.12.1", {"cu126", "cu129", "cu130", "cu132"}, "cu130", {"rocm7.1", "rocm7.2"}, ("3.10", "3.14")),
    ("2.13.0", {"cu126", "cu129", "cu130", "cu132"}, "cu130", {"rocm7.1", "rocm7.2"}, ("3.10", "3.15")),
    ("2.14.0", {"cu126", "cu130", "cu132"}, "cu130", {"rocm7.2"}, ("3.10", "3.15")),
    ("2.14.1", {"cu126", "cu130", "cu132"}, "cu130", {"rocm7.2"}, ("3.10", "3.15")),
    ("2.15.0", {"cu126", "cu130", "cu132"}, "cu132", {"rocm7.2"}, ("3.11", "3.15")),
]


@pytest.mark.parametrize(("version", "cuda", "default", "rocm", "python"), RELEASES)
def test_torch_releases(cat, version, cuda, default, rocm, python) -> None:  # type: ignore[no-untyped-def]
    from envbuild.plan.suggest import cuda_wheels_for

    rel, patch = cat.find_torch(version)
    assert patch.version == version
    assert {w.variant for w in cuda_wheels_for(rel, version)} == cuda
    assert rel.pypi_default_cuda == default
    assert {w.variant for w in rel.rocm} == rocm
    assert (rel.python[0], rel.python[-1]) == python


@pytest.mark.parametrize(
    ("version", "torchvision", "torchaudio", "triton"),
    [
        ("2.3.1", "0.18.1", "2.3.1", "2.3.1"),
        ("2.4.0", "0.19.0", "2.4.0", "3.0.0"),
        ("2.7.0", "0.22.0", "2.7.0", "3.3.0"),
        ("2.7.1", "0.22.1", "2.7.1", "3.3.1"),
        ("2.9.1", "0.24.1", "2.9.1", "3.5.1"),
        ("2.11.0", "0.26.0", "2.11.0", "3.6.0"),
        ("2.12.1", "0.27.1", None, "3.7.1"),
        ("2.13.0", "0.28.0", None, "3.7.1"),
        ("2.14.0", "0.29.0", None, "3.8.0"),
        ("2.14.1", "0.29.1", None, "3.8.0"),
        ("2.15.0", "0.29.2", "2.11.1", "3.9.0"),  # no torchvision 0.30 on PyPI; torchaudio 2.11.1 is back
    ],
)
def test_companions(cat, version, torchvision, torchaudio, triton) -> None:  # type: ignore[no-untyped-def]
    _, patch = cat.find_torch(version)
    assert (patch.torchvision, patch.torchaudio, patch.triton) == (torchvision, torchaudio, triton)


@pytest.mark.parametrize(
    ("version", "variant", "archs"),
    [
        ("2.6.0", "cu126", ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")),
        ("2.7.1", "cu128", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120+PTX")),
        ("2.8.0", "cu128", ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
        ("2.11.0", "cu128", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
        ("2.11.0", "cu130", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
        # the PyPI wheels' CUDA_ARCH_FLAGS: the cu130/cu132 builds promoted to PyPI carry no +PTX
        ("2.12.1", "cu130", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
        ("2.13.0", "cu130", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
        ("2.14.1", "cu130", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
        ("2.15.0", "cu132", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
        ("2.13.0", "cu132", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120+PTX")),
    ],
)
def test_arch_lists(cat, version, variant, archs) -> None:  # type: ignore[no-untyped-def]
    rel, _ = cat.find_torch(version)
    wheel = next(w for w in rel.cuda if w.variant == variant)
    assert wheel.archs == archs


def test_gfx942_absent_from_rocm5(cat) -> None:  # type: ignore[no-untyped-def]
    for rel in cat.releases:
        for wheel in rel.rocm:
            assert ("gfx942" in wheel.targets) == (not wheel.variant.startswith("rocm5")), wheel.variant


@pytest.mark.parametrize(
    ("variant", "image_version", "driver", "family"),
    [
        ("cu118", "11.8.0", "520.61.05", "450.80.02"),
        ("cu126", "12.6.3", "560.35.05", "525.60.13"),
        ("cu128", "12.8.1", "570.124.06", "525.60.13"),
        ("cu129", "12.9.1", "575.57.08", "525.60.13"),
        ("cu130", "13.0.2", "580.95.05", "580.65.06"),
        ("cu132", "13.2.1", "595.45.04", "580.65.06"),
    ],
)
def test_toolkits(cat, variant, image_version, driver, family) -> None:  # type: ignore[no-untyped-def]
    tk = cat.cuda_toolkit(variant)
    assert (tk.image_version, tk.driver) == (image_version, driver)
    assert cat.cuda_family(tk.major).driver == family


def test_images(cat) -> None:  # type: ignore[no-untyped-def]
    assert cat.cuda_image(cat.cuda_toolkit("cu128"), "devel", "ubuntu24.04") == (
        "nvidia/cuda:12.8.1-devel-ubuntu24.04"
    )
    assert cat.cuda_image(cat.cuda_toolkit("cu118"), "base", "ubuntu22.04") == (
        "nvidia/cuda:11.8.0-base-ubuntu22.04"
    )
    assert (
        cat.rocm_image(cat.rocm_version("rocm6.3"), "ubuntu22.04", complete=False)
        == "rocm/dev-ubuntu-22.04:6.3"
    )
    assert cat.rocm_image(cat.rocm_version("rocm7.2"), "ubuntu24.04", complete=True) == (
        "rocm/dev-ubuntu-24.04:7.2-complete"
    )
    assert {o.id: o.image for o in cat.oses} == {
        "debian12": "debian:12",
        "ubuntu22.04": "ubuntu:22.04",
        "ubuntu24.04": "ubuntu:24.04",
    }


def test_blender_urls(cat) -> None:  # type: ignore[no-untyped-def]
    assert cat.blender_urls("4.5.3") == (
        "https://download.blender.org/release/Blender4.5/blender-4.5.3-linux-x64.tar.xz",
        "https://download.blender.org/release/Blender4.5/blender-4.5.3.sha256",
    )
    assert "sm_120" not in cat.blender_series("4.2.1").cuda_cubins
    assert "sm_120" in cat.blender_series("4.5.0").cuda_cubins


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(catalog_dir(), target)
    return target


@pytest.mark.parametrize(
    ("file", "old", "new", "expect"),
    [
        ("cards.toml", 'arch = "sm_90"', 'arch = "hopper"', r"cards.toml: card\[5\].*h100.*arch"),
        ("cards.toml", "memory_gib = 141", 'memory_gib = "lots"', r"card\[7\] \(id .h200.\): memory_gib"),
        ("cards.toml", 'tier = "S"', 'tier = "maybe"', r"card\[0\].*tier"),
        (
            "torch.toml",
            'arch_list = "7.5;8.0;8.6;9.0;10.0;12.0+PTX"',
            'arch_list = "7.5;9.0+PTX;10.0"',
            r"arch_list",
        ),
        ("torch.toml", 'pypi_default_cuda = "cu126"', 'pypi_default_cuda = "cu999"', r"pypi_default_cuda"),
        (
            "toolkits.toml",
            'driver = "570.124.06"',
            'driver = "latest"',
            r"toolkits.toml: cuda\[4\].*cu128.*driver",
        ),
        ("platform.toml", 'glibc = "2.39"', 'glibc = "new"', r"platform.toml: os\[2\].*glibc"),
        (
            "blender.toml",
            "hip_min_major = 10",
            'hip_min_major = "ten"',
            r"blender.toml: series\[6\].*hip_min_major",
        ),
        ("cards.toml", 'id = "h200"', 'id = "h100"', r"duplicate 'h100'"),
        ("cards.toml", '[[card]]\nid = "cpu"', '[[card]]\nid = "cpu"\nbogus = 1', r"card\[13\].*bogus"),
        ("torch.toml", 'series = "2.1"', 'series = "2.1" oops', r"torch.toml: not valid TOML"),
        (
            "cards.toml",
            "device_memory_gib = 64",
            "device_memory_gib = 60",
            r"card\[10\] \(id .mi250x.\): .*devices_per_card x device_memory_gib = 2 x 60 GiB is not",
        ),
        ("cards.toml", 'vendor = "amd"\ngib = 1', 'vendor = "nvidia"\ngib = 1', r"duplicate 'nvidia'"),
        ("prices.toml", "usd = { 3 = 47.14", "usd = { 5 = 47.14", r"price\[0\].*rtx4090.*5 days is not"),
        ("prices.toml", 'card = "rtx4090"', 'card = "cpu"', r"price\[0\].*not a GPU card"),
        ("prices.toml", "max_lots = 10", "max_lots = 0", r"terms.*max_lots"),
    ],
)
def test_malformed_row(tmp_path: Path, file: str, old: str, new: str, expect: str) -> None:
    data = _copy(tmp_path)
    path = data / file
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(CatalogError, match=expect):
        load_catalog(data)


# ---- milestones stated in compat-facts §1/§2a, checked over every release x variant row ---------------


def _all_cuda_wheels(cat):  # type: ignore[no-untyped-def]
    from packaging.version import Version

    for rel in cat.releases:
        for wheel in rel.cuda:
            yield Version(rel.series), wheel


def test_sm100_first_in_2_7_cu128(cat) -> None:  # type: ignore[no-untyped-def]
    from packaging.version import Version

    for series, wheel in _all_cuda_wheels(cat):
        has = (10, 0) in wheel.cubins
        assert has == (series >= Version("2.7") and wheel.variant >= "cu128"), (series, wheel.variant)


def test_sm90_in_every_wheel_and_sm89_never(cat) -> None:  # type: ignore[no-untyped-def]
    for _, wheel in _all_cuda_wheels(cat):
        assert (9, 0) in wheel.cubins
        assert (8, 9) not in wheel.cubins


def test_old_archs_milestones(cat) -> None:  # type: ignore[no-untyped-def]
    from packaging.version import Version

    for series, wheel in _all_cuda_wheels(cat):
        if (3, 7) in wheel.cubins:  # sm_37 last in cu118 (<= 2.7)
            assert wheel.variant == "cu118" and series <= Version("2.7")
        if (5, 0) in wheel.cubins:  # sm_50/60 only in cu126 and older
            assert wheel.variant <= "cu126"
        if wheel.variant.startswith("cu13"):  # CUDA 13 starts at Turing
            assert min(wheel.cubins) == (7, 5)
        if wheel.variant in {"cu128", "cu129"} and (7, 0) in wheel.cubins:  # Volta kept 2.8-2.10
            assert Version("2.8") <= series <= Version("2.10")


def test_pypi_default_by_release(cat) -> None:  # type: ignore[no-untyped-def]
    expected = {
        "2.1": "cu121", "2.2": "cu121", "2.3": "cu121", "2.4": "cu121", "2.5": "cu124", "2.6": "cu124",
        "2.7": "cu126", "2.8": "cu128", "2.9": "cu128", "2.10": "cu128", "2.11": "cu130", "2.12": "cu130",
        "2.13": "cu130", "2.14": "cu130", "2.15": "cu132",
    }  # fmt: skip
    assert {r.series: r.pypi_default_cuda for r in cat.releases if r.series in expected} == expected


def test_companion_pairing_rule(cat) -> None:  # type: ignore[no-untyped-def]
    # 2.15.0 breaks the rule: PyPI has no torchvision 0.30; 0.29.2 and torchaudio 2.11.1 (stable-ABI
    # wheels built +cu132) were published with it (test_companions)
    for rel in cat.releases:
        minor = int(rel.series.split(".")[1])
        for patch in rel.patch:
            if patch.version == "2.15.0":
                continue
            micro = patch.version.split(".")[2]
            assert patch.torchvision == f"0.{minor + 15}.{micro}"
            if minor <= 11:
                assert patch.torchaudio == patch.version
            else:
                assert patch.torchaudio is None


def test_image_os_are_known(cat) -> None:  # type: ignore[no-untyped-def]
    oses = {o.id for o in cat.oses}
    for tk in cat.toolkits.cuda:
        assert set(tk.image_os) <= oses
    for rv in cat.toolkits.rocm:
        assert set(rv.image_os) <= oses and "debian12" not in rv.image_os
