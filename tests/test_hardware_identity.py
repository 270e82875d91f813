"""Card identity (issue 26): the catalog's product names and PCI device ids, its lookalikes, and names
from the machine's pci.ids."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envbuild.catalog import load_catalog
from envbuild.errors import CatalogError
from envbuild.hardware.identity import identify
from envbuild.hardware.pciids import pci_name
from envbuild.models.hardware import DeviceFacts
from envbuild.resources import catalog_dir

# An excerpt of the real pci.ids, lines copied verbatim from pciutils/pciids commit
# c1c12547d626ebf05fd0223144ad87fab5e95d06 (Version 2026.08.22): the file's layout (comments, vendor
# lines, tab-indented devices, two-tab subsystems) with the ids the tests name.
PCI_IDS_EXCERPT = """\
#	List of PCI ID's
#	Version: 2026.08.22
10de  NVIDIA Corporation
	2321  GH100 [H100L 94GB]
	2330  GH100 [H100 SXM5 80GB]
		10de 16c1  H100 SXM5 80GB
	2331  GH100 [H100 PCIe]
10df  Emulex Corporation
	2330  not NVIDIA's
1002  Advanced Micro Devices, Inc. [AMD/ATI]
	74a1  Aqua Vanjaram [Instinct MI300X]
	74a2  Aqua Vanjaram [Instinct MI308X]
"""


@pytest.fixture
def pci_ids(tmp_path: Path) -> Path:
    path = tmp_path / "pci.ids"
    path.write_text(PCI_IDS_EXCERPT, encoding="utf-8")
    return path


def test_pci_ids_names_a_device_of_its_vendor_only(pci_ids: Path) -> None:
    assert pci_name("10de:2330", pci_ids) == "GH100 [H100 SXM5 80GB]"
    assert pci_name("1002:74A2", pci_ids) == "Aqua Vanjaram [Instinct MI308X]"
    assert pci_name("10de:9999", pci_ids) is None
    assert pci_name("10de:2330", pci_ids.with_name("absent")) is None


@pytest.mark.parametrize(
    ("name", "pci", "kind", "row"),
    [
        ("NVIDIA H100 80GB HBM3", "10de:2330", "card", "h100"),
        ("NVIDIA H100 PCIe", None, "card", "h100-pcie"),
        ("", "10de:2321", "lookalike", "h100-nvl"),  # no name: the PCI id tells
        ("NVIDIA A100-SXM4-40GB", None, "card", "a100-40gb"),
        ("NVIDIA A100-SXM4-8...", None, "card", "a100-80gb"),  # cut by the plain table
        ("AMD Instinct MI300X", "1002:74a1", "card", "mi300x"),
        ("AMD Instinct MI250", "1002:740c", "lookalike", "mi250"),  # shared id: the name tells
        ("", "1002:74a2", "lookalike", "mi308x"),
        ("", "1002:74a0", "lookalike", "mi300a"),
        ("NVIDIA GeForce RTX 3090", None, "lookalike", "rtx3090"),
        ("Tesla T4", "10de:1eb8", "unknown", None),
    ],
)
def test_identify(name: str, pci: str | None, kind: str, row: str | None) -> None:
    who = identify(DeviceFacts(index=0, name=name, pci_device_id=pci), load_catalog())
    assert (who.kind, who.id) == (kind, row)
    if row:
        assert who.source and "pci.ids" in who.source


def test_an_unknown_id_is_described_from_pci_ids(pci_ids: Path) -> None:
    dev = DeviceFacts(index=0, name="", pci_device_id="10de:2331")
    cat = load_catalog()
    assert (
        identify(dev, cat, pci_ids=pci_ids).evidence == "PCI device id 10de:2331 (pci.ids: GH100 [H100 PCIe])"
    )


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ('pci_ids = ["10de:2331"]', 'pci_ids = ["10de:2330"]', r"duplicate '10de:2330'"),
        (
            'pci_ids = ["10de:2331"]',
            'pci_ids = ["10DE:2331"]',
            r"h100-pcie.*pci_ids.*not a valid PCI device id",
        ),
        ('instead_of = ["rtx4090"]', 'instead_of = ["rtx9999"]', r"lookalike\[\d+\] \(rtx3090\): instead_of"),
        ('product_names = ["AMD Instinct MI250"]\n', "", r"\(id .mi250.\).*needs product_names or pci_ids"),
    ],
)
def test_malformed_identity_rows(tmp_path: Path, old: str, new: str, expect: str) -> None:
    data = tmp_path / "data"
    shutil.copytree(catalog_dir(), data)
    path = data / "cards.toml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(CatalogError, match=expect):
        load_catalog(data)
