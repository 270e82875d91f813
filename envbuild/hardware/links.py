"""What ``nvidia-smi`` output cannot say about NVLink and the NVSwitch fabric, told from the card.

``nvidia-smi -q -x`` carries no NVLink state at all, and DTDs before v12 (and the plain screen) no
fabric state, so the parsers leave those facts ``None`` (not reported) and the rules list them as
unjudged.  For a card that has no NVLink connector that is wrong: it has no links to judge (``()``), and
a card that is not on an NVSwitch baseboard has no fabric state (:data:`NOT_APPLICABLE`).  Both are
told here from the product name or PCI device id; a card not listed keeps ``None`` (an RTX 3090 or an
A100 PCIe may carry an NVLink bridge, an SXM card sits on a fabric).
"""

from __future__ import annotations

from dataclasses import replace

from envbuild.models.hardware import NOT_APPLICABLE, DeviceFacts

# NVIDIA cards without an NVLink connector (PCIe their only interconnect, as NVIDIA's product
# specifications list it): product name as nvidia-smi prints it -> PCI device id (pci.ids).
NO_NVLINK: dict[str, str] = {
    "Tesla T4": "10de:1eb8",
    "NVIDIA A10": "10de:2236",
    "NVIDIA A10G": "10de:2237",
    "NVIDIA L4": "10de:27b8",
    "NVIDIA L40": "10de:26b5",
    "NVIDIA L40S": "10de:26b9",
    "NVIDIA GeForce RTX 3060": "10de:2487",
    "NVIDIA GeForce RTX 3080": "10de:2216",
    "NVIDIA GeForce RTX 4090": "10de:2684",
    "NVIDIA GeForce RTX 4090 D": "10de:2685",
    "NVIDIA GeForce RTX 5090": "10de:2b85",
    "NVIDIA RTX 4000 SFF Ada Generation": "10de:27b0",
    "NVIDIA GeForce GTX 1660 Ti": "10de:2184",
    "Quadro P400": "10de:1cb3",
}
NO_NVLINK_SOURCE = (
    "NVIDIA product specifications (interconnect: PCIe only, no NVLink connector) for T4, A10/A10G, "
    "L4, L40/L40S, GeForce RTX 3060/3080/4090/5090, RTX 4000 SFF Ada, GTX 1660 Ti, Quadro P400; PCI "
    "device ids from pci.ids"
)
_NO_NVLINK_IDS = frozenset(NO_NVLINK.values())
_NO_NVLINK_NAMES = frozenset(n.lower() for n in NO_NVLINK)
# Brands of PCIe workstation and consumer cards, never on an NVSwitch baseboard (nvidia-smi's
# <product_brand>, or a word of the product name where the output has no brand).
_PCIE_BRANDS = ("geforce", "quadro", "nvidia rtx", "titan")


def no_nvlink(dev: DeviceFacts) -> bool:
    """The card has no NVLink connector (by its PCI device id, else its product name)."""
    if dev.pci_device_id:
        return dev.pci_device_id.lower() in _NO_NVLINK_IDS
    return " ".join(dev.name.split()).lower() in _NO_NVLINK_NAMES


def off_fabric(dev: DeviceFacts, brand: str | None = None) -> bool:
    """The card cannot sit on an NVSwitch fabric: no NVLink, a PCIe product, or a PCIe-only brand."""
    name = dev.name.lower()
    words = (brand or "").lower() or name
    return no_nvlink(dev) or "pcie" in name or any(b in words for b in _PCIE_BRANDS)


def known_links(dev: DeviceFacts, brand: str | None = None) -> DeviceFacts:
    """``dev`` with an unreported NVLink state ``()`` and fabric state N/A where the card tells."""
    nvlink = () if dev.nvlink_up is None and no_nvlink(dev) else dev.nvlink_up
    fabric = NOT_APPLICABLE if dev.fabric_state is None and off_fabric(dev, brand) else dev.fabric_state
    if nvlink == dev.nvlink_up and fabric == dev.fabric_state:
        return dev
    return replace(dev, nvlink_up=nvlink, fabric_state=fabric)
