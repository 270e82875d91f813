"""Load the catalog TOML files once, validate every row, and cross-check references.

A malformed row raises :class:`envbuild.errors.CatalogError` naming the file, the row (with its id)
and the key; that is a bug in envbuild's shipped data, never in the user's input.

A file already validated, byte for byte, by the same models and versions is read back from the
per-user cache (:mod:`envbuild.catalog.cache`) instead of being parsed and validated again; the
cross-checks between files run on every load.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from envbuild.boundary import INPUT, InvalidData, error_message, parse
from envbuild.catalog import cache
from envbuild.catalog.blender_rows import BlenderCatalog
from envbuild.catalog.card_rows import CardEntry, LookalikeEntry, PriceEntry, ReserveEntry, Terms
from envbuild.catalog.platform_rows import AptSnapshot, OsEntry
from envbuild.catalog.rows import not_empty
from envbuild.catalog.toolkit_rows import Toolkits
from envbuild.catalog.torch_rows import TorchCatalog
from envbuild.errors import CatalogError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

M = TypeVar("M", bound="DataclassInstance")

FILES = ("cards.toml", "torch.toml", "toolkits.toml", "platform.toml", "blender.toml", "prices.toml")


@dataclass(frozen=True, kw_only=True)
class CardsFile:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    reserve: tuple[ReserveEntry, ...]
    card: tuple[CardEntry, ...]
    lookalike: tuple[LookalikeEntry, ...] = ()  # cards passed off for catalog cards (issue 26)

    def __post_init__(self) -> None:
        not_empty("reserve", self.reserve)
        not_empty("card", self.card)


@dataclass(frozen=True, kw_only=True)
class PricesFile:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    terms: Terms
    price: tuple[PriceEntry, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PlatformFile:
    __pydantic_config__ = INPUT  # read from outside: see envbuild.boundary

    os: tuple[OsEntry, ...]
    apt_snapshot: tuple[AptSnapshot, ...] = ()

    def __post_init__(self) -> None:
        not_empty("os", self.os)


def _row_label(data: Any, loc: tuple[int | str, ...]) -> str:
    """``('card', 3, 'memory_gib')`` -> ``card[3] (id 'h100'): memory_gib``."""
    parts: list[str] = []
    node: Any = data
    row, row_len = "", 0
    for item in loc:
        if isinstance(item, int) and parts:
            parts[-1] = f"{parts[-1]}[{item}]"
        else:
            parts.append(str(item))
        try:
            node = node[item]
        except (KeyError, IndexError, TypeError):
            node = None
        if isinstance(node, dict):
            key = next((k for k in ("id", "variant", "version", "series", "major") if k in node), None)
            if key is not None:
                row, row_len = f"{'.'.join(parts)} ({key} {node[key]!r})", len(parts)
    rest = ".".join(parts[row_len:]) if row else ".".join(parts)
    if row:
        return f"{row}: {rest}" if rest else row
    return rest or "(top level)"


def _load(path: Path, model: type[M]) -> M:
    """``path`` validated as ``model``: from the cache when it holds these bytes, else in full."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read catalog file: {exc.strerror or exc}") from None
    key = cache.cache_key(raw, model)
    cached = cache.load(path, model, key)
    if cached is not None:
        return cached
    obj = _validate(path, raw, model)
    cache.store(path, model, key, obj)
    return obj


def load_data_file(path: Path, model: type[M]) -> M:
    """A catalog file outside the six the planner reads (``performance.toml``), validated and cached as
    they are."""
    return _load(path, model)


def _validate(path: Path, raw: bytes, model: type[M]) -> M:
    """Parse and validate every row of ``path`` (whose bytes are ``raw``) as ``model``."""
    from envbuild.compat import tomllib

    # Decoded exactly as Path.read_text(encoding="utf-8") would (universal newlines).
    text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{path}: not valid TOML: {exc}") from None
    try:
        return parse(model, data)
    except InvalidData as exc:
        lines = []
        for err in exc.errors[:5]:
            lines.append(f"{path.name}: {_row_label(data, tuple(err['loc']))}: {error_message(err)}")
        more = len(exc.errors) - len(lines)
        tail = f"\n  ... and {more} more" if more > 0 else ""
        raise CatalogError(f"malformed catalog row in {path}:\n  " + "\n  ".join(lines) + tail) from None


def _unique(file: str, kind: str, keys: list[str]) -> None:
    seen: set[str] = set()
    for i, key in enumerate(keys):
        if key in seen:
            raise CatalogError(f"{file}: {kind}[{i}]: duplicate {key!r}")
        seen.add(key)


def _check_identities(cards: CardsFile, gpu_ids: set[str]) -> None:
    """Lookalikes pass for catalog GPU cards; no PCI device id or product name names two rows."""
    _unique("cards.toml", "lookalike", [row.id for row in cards.lookalike])
    for i, row in enumerate(cards.lookalike):
        odd = [c for c in row.instead_of if c not in gpu_ids]
        if odd:
            raise CatalogError(
                f"cards.toml: lookalike[{i}] ({row.id}): instead_of {odd[0]!r} is not a GPU card"
            )
    rows: tuple[CardEntry | LookalikeEntry, ...] = (*cards.card, *cards.lookalike)
    _unique("cards.toml", "pci_ids", [pci for row in rows for pci in row.pci_ids])
    _unique("cards.toml", "product_names", [name.lower() for row in rows for name in row.product_names])


def _check_cards_and_prices(cards: CardsFile, prices: PricesFile) -> None:
    _unique("cards.toml", "card", [c.id for c in cards.card])
    _unique("cards.toml", "reserve", [r.vendor for r in cards.reserve])
    _unique("prices.toml", "price", [p.card for p in prices.price])
    reserved = {r.vendor for r in cards.reserve}
    for i, card in enumerate(cards.card):
        if card.vendor != "cpu" and card.vendor not in reserved:
            raise CatalogError(
                f"cards.toml: card[{i}] ({card.id}): no [[reserve]] row for vendor {card.vendor}"
            )
    gpu_ids = {c.id for c in cards.card if c.vendor != "cpu"}
    _check_identities(cards, gpu_ids)
    for i, price in enumerate(prices.price):
        where = f"prices.toml: price[{i}] (card {price.card!r})"
        if price.card not in gpu_ids:
            raise CatalogError(f"{where}: not a GPU card of cards.toml")
        odd = sorted(set(price.usd) - set(prices.terms.days))
        if odd:
            raise CatalogError(
                f"{where}: usd: {odd[0]} days is not a rental duration (terms.days: "
                f"{', '.join(map(str, prices.terms.days))})"
            )


def load_files(
    directory: Path,
) -> tuple[CardsFile, TorchCatalog, Toolkits, PlatformFile, BlenderCatalog, PricesFile]:
    cards = _load(directory / "cards.toml", CardsFile)
    torch = _load(directory / "torch.toml", TorchCatalog)
    toolkits = _load(directory / "toolkits.toml", Toolkits)
    platform = _load(directory / "platform.toml", PlatformFile)
    blender = _load(directory / "blender.toml", BlenderCatalog)
    prices = _load(directory / "prices.toml", PricesFile)

    _check_cards_and_prices(cards, prices)
    _unique("torch.toml", "release", [r.series for r in torch.release])
    _unique("toolkits.toml", "cuda", [t.variant for t in toolkits.cuda])
    _unique("toolkits.toml", "rocm", [t.variant for t in toolkits.rocm])
    _unique("platform.toml", "os", [o.id for o in platform.os])
    _unique("blender.toml", "series", [s.series for s in blender.series])

    cuda_variants = {t.variant for t in toolkits.cuda}
    rocm_variants = {t.variant for t in toolkits.rocm}
    majors = {f.major for f in toolkits.family}
    for i, tk in enumerate(toolkits.cuda):
        if tk.major not in majors:
            raise CatalogError(
                f"toolkits.toml: cuda[{i}] ({tk.variant}): no [[family]] row for CUDA {tk.major}.x"
            )
        if tk.variant != "cu" + tk.version.replace(".", ""):
            raise CatalogError(
                f"toolkits.toml: cuda[{i}] ({tk.variant}): version {tk.version} does not match"
            )
    for i, rel in enumerate(torch.release):
        where = f"torch.toml: release[{i}] (series {rel.series!r})"
        patches = [p.version for p in rel.patch]
        for p in patches:
            if not p.startswith(rel.series + "."):
                raise CatalogError(f"{where}: patch {p!r} is not in series {rel.series}")
        for j, wheel in enumerate(rel.cuda):
            if wheel.variant not in cuda_variants:
                raise CatalogError(
                    f"{where}: cuda[{j}]: variant {wheel.variant!r} has no row in toolkits.toml"
                )
            bad = [p for p in wheel.only_patches if p not in patches]
            if bad:
                raise CatalogError(f"{where}: cuda[{j}]: only_patches names unknown patch {bad[0]!r}")
        for j, rwheel in enumerate(rel.rocm):
            if rwheel.variant not in rocm_variants:
                raise CatalogError(
                    f"{where}: rocm[{j}]: variant {rwheel.variant!r} has no row in toolkits.toml"
                )
        if rel.pypi_default_cuda not in {w.variant for w in rel.cuda}:
            raise CatalogError(
                f"{where}: pypi_default_cuda {rel.pypi_default_cuda!r} is not one of its cuda variants"
            )
    return cards, torch, toolkits, platform, blender, prices
