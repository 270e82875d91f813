"""Which card a device is: a catalog card, a lookalike renters get instead of one, or unknown.

A device is named by its product name as the vendor tool prints it (exact, or the prefix the plain
``nvidia-smi`` table leaves before ``...``), else by its PCI device id, against the catalog's rows
(``product_names``, ``pci_ids``) and lookalikes (``cards.toml`` ``[[lookalike]]``).  A device neither
names is described from the machine's ``pci.ids`` when it lists the id (:mod:`.pciids`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from envbuild.hardware.pciids import pci_name

if TYPE_CHECKING:
    from envbuild.catalog import CardEntry, Catalog, LookalikeEntry
    from envbuild.models.hardware import DeviceFacts


@dataclass(frozen=True, kw_only=True)
class Identity:
    kind: Literal["card", "lookalike", "unknown"]
    card: CardEntry | None = None
    lookalike: LookalikeEntry | None = None
    evidence: str  # "PCI device id 10de:2321 (pci.ids: GH100 [H100L 94GB])", "product name '...'"

    @property
    def id(self) -> str | None:
        row = self.card or self.lookalike
        return row.id if row is not None else None

    @property
    def source(self) -> str | None:
        if self.card is not None:
            return self.card.identity_source
        return self.lookalike.source if self.lookalike is not None else None


def _norm(name: str) -> str:
    return " ".join(name.split()).lower()


def _by_name(
    name: str, rows: Sequence[CardEntry | LookalikeEntry]
) -> tuple[CardEntry | LookalikeEntry | None, str]:
    """The row whose product name is ``name``; a name the table cut (``NVIDIA A100-SXM4-8...``) matches
    the one product name it begins."""
    want = _norm(name)
    for row in rows:
        if any(_norm(n) == want for n in row.product_names):
            return row, f"product name {name!r}"
    if want.endswith("..."):
        stem = want.removesuffix("...").rstrip()
        hits = [row for row in rows if any(_norm(n).startswith(stem) for n in row.product_names)]
        if len(hits) == 1 and stem:
            return hits[0], f"product name {name!r} (cut by the table)"
    return None, ""


def _pci_evidence(pci_id: str, pci_ids: Path | None) -> str:
    named = pci_name(pci_id, pci_ids)
    return f"PCI device id {pci_id}" + (f" (pci.ids: {named})" if named else "")


def identify(device: DeviceFacts, catalog: Catalog, *, pci_ids: Path | None = None) -> Identity:
    """What ``device`` is, from its product name, else its PCI device id (``pci_ids``: the pci.ids
    file to name an id with; default the machine's)."""
    from envbuild.catalog import CardEntry

    rows: list[CardEntry | LookalikeEntry] = [*catalog.cards, *catalog.lookalikes]
    row, evidence = _by_name(device.name, rows) if device.name else (None, "")
    pci = (device.pci_device_id or "").lower()
    if row is None and pci:
        row = next((r for r in rows if pci in r.pci_ids), None)
        evidence = _pci_evidence(pci, pci_ids)
    elif row is not None and pci:
        evidence += f", {_pci_evidence(pci, pci_ids)}"
    if isinstance(row, CardEntry):
        return Identity(kind="card", card=row, evidence=evidence)
    if row is not None:
        return Identity(kind="lookalike", lookalike=row, evidence=evidence)
    parts = [f"product name {device.name!r}"] if device.name else []
    if pci:
        parts.append(_pci_evidence(pci, pci_ids))
    return Identity(kind="unknown", evidence=", ".join(parts) or "no name or PCI device id reported")
