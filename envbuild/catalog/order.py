"""What to order for a plan: lots, cards, devices, idle devices and the USD total per duration.

One place for the arithmetic that the planner (lot limits, idle cards), the README's "What to order"
table and the ``check``/``render`` summaries share.  ``resources.gpus`` counts devices as torch sees
them (an MI250X card is two); a lot holds ``cards_per_lot`` cards.  The total of an order is the lot
price for the duration x the number of lots: a lot's price already covers all of its cards (a B200
lot is two cards, one price), so it is never multiplied by cards or devices.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from envbuild.catalog import load_catalog
from envbuild.models import Card, LotPrice, Plan
from envbuild.typed import Record

if TYPE_CHECKING:
    from decimal import Decimal


def lots_needed(gpus: int, devices_per_lot: int) -> int:
    """Whole lots holding ``gpus`` devices (at least one)."""
    return max(1, math.ceil(gpus / max(1, devices_per_lot)))


def usd(value: float | Decimal) -> Decimal:
    """An amount in USD, to the cent (TOML floats go through their shortest text form)."""
    from decimal import ROUND_HALF_UP, Decimal  # with a price only

    amount = value if isinstance(value, Decimal) else Decimal(str(value))
    return amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def money(value: Decimal) -> str:
    return f"{value:,.2f} USD"


class Total(Record, kw_only=False):
    days: int
    price: LotPrice | None  # None: no price known for this card and duration
    lots: int

    @property
    def per_lot(self) -> Decimal | None:
        return usd(self.price.usd) if self.price else None

    @property
    def usd(self) -> Decimal | None:
        return usd(self.per_lot * self.lots) if self.per_lot is not None else None

    @property
    def text(self) -> str:
        """``2 x 110.00 USD = 220.00 USD`` or ``no price known``."""
        if self.per_lot is None or self.usd is None:
            return "no price known"
        return f"{self.lots} x {money(self.per_lot)} = {money(self.usd)}"


class OrderLine(Record, kw_only=False):
    card: Card
    gpus: int  # resources.gpus: devices the job uses at once
    lots: int
    totals: tuple[Total, ...]  # one per duration shown (--days, or every duration the provider rents)

    @property
    def cards(self) -> int:
        return self.lots * self.card.cards_per_lot

    @property
    def devices(self) -> int:
        return self.cards * self.card.devices_per_card

    @property
    def idle(self) -> int:
        """Devices ordered that the job leaves unused (cards, for one-device cards)."""
        return max(0, self.devices - self.gpus)

    def as_json(self) -> dict[str, Any]:
        return {
            "card": self.card.id,
            "lots": self.lots,
            "cards": self.cards,
            "devices": self.devices,
            "idle_devices": self.idle,
            "prices": [
                {
                    "days": t.days,
                    "usd_per_lot": None if t.per_lot is None else float(t.per_lot),
                    "usd": None if t.usd is None else float(t.usd),
                    "source": t.price.source if t.price else None,
                    "date": t.price.date if t.price else None,
                }
                for t in self.totals
            ],
        }

    def summary(self) -> str:
        """``rtx4090: 2 lots, 2 cards; 7 days: 2 x 110.00 USD = 220.00 USD``."""
        what = f"{_count(self.lots, 'lot')}, {_count(self.cards, 'card')}"
        if self.card.devices_per_card > 1:
            what += f" ({self.devices} devices)"
        prices = "; ".join(f"{t.days} days: {t.text}" for t in self.totals)
        return f"{self.card.id}: {what}" + (f"; {prices}" if prices else "")


def durations(plan: Plan) -> tuple[int, ...]:
    """The chosen duration, or every duration the provider rents for."""
    return (plan.days,) if plan.days is not None else load_catalog().terms.days


def order_lines(plan: Plan) -> tuple[OrderLine, ...]:
    """One line per GPU target (the cpu pseudo-card is not ordered)."""
    gpus = plan.profile.resources.gpus
    days = durations(plan)
    lines = []
    for card in plan.targets:
        if card.vendor == "cpu":
            continue
        lots = lots_needed(gpus, card.devices_per_lot)
        totals = tuple(
            Total(d, next((p for p in plan.prices if p.card == card.id and p.days == d), None), lots)
            for d in days
        )
        lines.append(OrderLine(card=card, gpus=gpus, lots=lots, totals=totals))
    return tuple(lines)


def price_sources(plan: Plan) -> tuple[str, ...]:
    """``source (date)`` of every price used by the plan's order, sorted, without duplicates."""
    used = {t.price for line in order_lines(plan) for t in line.totals if t.price is not None}
    return tuple(sorted({f"{p.source} ({p.date})" for p in used}))


def summary_lines(plan: Plan) -> list[str]:
    """One line per GPU target (lots, cards, total per duration), then where the prices come from."""
    lines = [line.summary() for line in order_lines(plan)]
    sources = price_sources(plan)
    if lines:
        lines.append(
            f"prices: {'; '.join(sources)}" if sources else "prices: none known (--prices FILE.toml)"
        )
    return lines
