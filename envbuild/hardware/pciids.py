"""Name a PCI device id from the machine's ``pci.ids`` (Debian's ``pci.ids`` or ``hwdata`` package).

The file is the PCI ID Repository's list (https://pci-ids.ucw.cz, pciutils/pciids on GitHub): a vendor
line ``10de  NVIDIA Corporation`` at column 0, its devices indented by one tab (``\\t2330  GH100 [H100
SXM5 80GB]``), subsystems by two.  Only the vendor's block is read, and only when a name is asked for.
Cards too new for the installed file are named by the catalog's own rows instead
(:mod:`envbuild.hardware.identity`).
"""

from __future__ import annotations

import functools
from pathlib import Path

# Where Debian and Ubuntu put it (pciutils' pci.ids package; hwdata on Fedora and newer Debian).
PCI_IDS_PATHS = (Path("/usr/share/misc/pci.ids"), Path("/usr/share/hwdata/pci.ids"))


def pci_ids_file(paths: tuple[Path, ...] = PCI_IDS_PATHS) -> Path | None:
    """The first ``pci.ids`` present on the machine, or None."""
    return next((p for p in paths if p.is_file()), None)


@functools.cache
def _vendor_block(path: Path, vendor: str) -> dict[str, str]:
    """``{"2330": "GH100 [H100 SXM5 80GB]", ...}`` for ``vendor`` ("10de") in ``path``."""
    devices: dict[str, str] = {}
    inside = False
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("#") or not line.strip():
                    continue
                if not line.startswith("\t"):
                    if inside:
                        break  # the next vendor: this one's block is over
                    inside = line[:4].lower() == vendor
                elif inside and not line.startswith("\t\t"):
                    dev, _, name = line.strip().partition(" ")
                    devices[dev.lower()] = name.strip()
    except OSError:
        return {}
    return devices


def pci_name(pci_id: str, path: Path | None = None) -> str | None:
    """``"10de:2330"`` -> ``"GH100 [H100 SXM5 80GB]"`` from ``path`` (default: the machine's pci.ids),
    or None when there is no file or it does not list the device."""
    path = path if path is not None else pci_ids_file()
    vendor, _, device = pci_id.lower().partition(":")
    if path is None or not device:
        return None
    return _vendor_block(path, vendor).get(device)
