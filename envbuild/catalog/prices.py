"""Lot prices: the built-in rows of ``envbuild/data/prices.toml`` and a user's ``--prices FILE.toml``.

A user's price file (documented in ``envbuild/data/README.md``)::

    source = "IteraGPU order page"     # where the prices come from (shown beside every total)
    date = "2026-12-15"                # when they were read (YYYY-MM-DD or YYYY-MM)

    [b200]                             # a card id (`envbuild targets`)
    7 = 700.0                          # days = USD for one lot (all its cards) for that duration
    30 = 2600

Its rows replace the built-in price of the same card and duration.  Every problem is reported at once
(file + key, what is wrong, the valid choices) as a :class:`~envbuild.errors.UsageError` (exit 2).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from envbuild.catalog import Catalog, load_catalog
from envbuild.catalog.card_rows import check_date
from envbuild.compat import tomllib
from envbuild.errors import Issue, UsageError, choices
from envbuild.models import CheckResult, LotPrice

META = ("source", "date")


def builtin_prices(catalog: Catalog) -> tuple[LotPrice, ...]:
    return tuple(
        LotPrice(
            card=row.card,
            days=days,
            usd=usd,
            source=f"{catalog.terms.provider} rate, {row.cite}",
            date=row.date,
        )
        for row in catalog.prices
        for days, usd in sorted(row.usd.items())
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--prices {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"--prices {path}: cannot read the price file: {reason}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--prices {path}: not valid TOML: {exc}") from None


def _days(key: str, days: tuple[int, ...]) -> int | None:
    return int(key) if key.isdigit() and int(key) in days else None


def load_price_file(path: Path, catalog: Catalog | None = None) -> tuple[LotPrice, ...]:
    """Read and check a user's price file; raise one UsageError listing every problem."""
    cat = catalog or load_catalog()
    data = _read(path)
    file = str(path)
    issues: list[Issue] = []
    days = cat.terms.days
    valid_days = ", ".join(map(str, days))
    gpu_ids = [c.id for c in cat.cards if c.vendor != "cpu"]

    source = data.get("source")
    if not isinstance(source, str) or len(source.strip()) < 3:
        issues.append(
            Issue(file, "source", "expected a text saying where the prices come from (a page, a quote)")
        )
    import datetime  # a price file only (TOML reads a bare date as datetime.date)

    raw_date = data.get("date")
    date = raw_date.isoformat() if isinstance(raw_date, datetime.date) else raw_date
    if not isinstance(date, str):
        issues.append(Issue(file, "date", "expected the date the prices were read: YYYY-MM-DD or YYYY-MM"))
    else:
        try:
            check_date(date)
        except ValueError:
            issues.append(Issue(file, "date", f"expected YYYY-MM-DD or YYYY-MM, got {date!r}"))

    rows: list[tuple[str, str, object]] = []
    for key, value in data.items():
        if key in META:
            continue
        if key not in gpu_ids:
            issues.append(
                Issue(file, key, f"not a card id; valid: {choices(gpu_ids)} (besides source, date)")
            )
        elif not isinstance(value, dict) or not value:
            issues.append(Issue(file, key, f"expected a table of days = USD per lot (days: {valid_days})"))
        else:
            rows += [(key, str(d), usd) for d, usd in value.items()]
    if not rows and not issues:
        issues.append(
            Issue(
                file,
                "",
                f"no prices: add a table per card id, e.g. [rtx4090] with 7 = 110 ({valid_days} days)",
            )
        )

    prices: list[LotPrice] = []
    for card, key, value in rows:
        n = _days(key, days)
        if n is None:
            issues.append(Issue(file, f"{card}.{key}", f"not a rental duration in days; valid: {valid_days}"))
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            issues.append(
                Issue(file, f"{card}.{key}", f"expected a positive number of USD per lot, got {value!r}")
            )
        else:
            prices.append(LotPrice(card=card, days=n, usd=float(value), source=str(source), date=str(date)))
    if issues:
        count = f"{len(issues)} problem{'s' if len(issues) != 1 else ''}"
        raise UsageError(f"invalid price file {file} ({count}):\n" + "\n".join(f"  - {i}" for i in issues))
    return tuple(prices)


def merged(builtin: tuple[LotPrice, ...], user: tuple[LotPrice, ...]) -> tuple[LotPrice, ...]:
    """The user's prices replace built-in ones for the same card and duration."""
    table = {(p.card, p.days): p for p in builtin}
    table.update({(p.card, p.days): p for p in user})
    return tuple(table[k] for k in sorted(table))


def with_order(
    result: CheckResult, *, days: int | None = None, price_file: Path | None = None
) -> CheckResult:
    """``result`` with the chosen duration and the lot prices known for its targets on its plan.

    ``days`` must be a duration the provider rents for (``UsageError`` naming the valid ones).
    """
    catalog = load_catalog()
    terms = catalog.terms
    if days is not None and days not in terms.days:
        valid = ", ".join(map(str, terms.days))
        raise UsageError(
            f"--days {days}: {terms.provider} rents for {valid} days; valid: {valid} ({terms.cite})"
        )
    user = load_price_file(price_file, catalog) if price_file is not None else ()
    targets = {c.id for c in result.plan.targets}
    prices = tuple(p for p in merged(builtin_prices(catalog), user) if p.card in targets)
    plan = replace(result.plan, days=days, prices=prices)
    return CheckResult(plan=plan, findings=result.findings)
