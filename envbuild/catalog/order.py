"""What to order for a plan: lots, cards, devices, idle devices and the USD total per duration.

One place for the arithmetic that the planner (lot limits, idle cards), the README's "What to order"
table and the ``check``/``render`` summaries share.  ``resources.gpus`` counts devices as torch sees
them (an MI250X card is two); a lot holds ``cards_per_lot`` cards.  The total of an order is the lot
price for the duration x the number of lots: a lot's price already covers all of its cards (a B200
lot is two cards, one price), so it is never multiplied by cards or devices.  Each lot is a machine
of its own: it must give the container the declared host memory and CPUs (``resources.memory_gib``,
``resources.cpus``) and an NVIDIA driver at the plan's floor, and a job across lots talks over the
network (torch.distributed), not NVLink.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envbuild.catalog import load_catalog
from envbuild.models import Card, LotPrice, Plan

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


@dataclass(frozen=True)
class Total:
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


ACROSS_LOTS = "torch.distributed over the network, not NVLink"
# Said right where a driver floor (or CUDA version) is stated while it still depends on which torch the
# resolution installs (W-DRIVER-PROVISIONAL): the plan's floor holds only for the torch it assumed.
PROVISIONAL = (
    "provisional: torch is not pinned; run `envbuild lock`, which derives it from the torch installed"
)


@dataclass(frozen=True)
class OrderLine:
    card: Card
    gpus: int  # resources.gpus: devices the job uses at once
    lots: int
    totals: tuple[Total, ...]  # one per duration shown (--days, or every duration the provider rents)
    memory_gib: float | None = None  # resources.memory_gib: host memory each machine must give
    cpus: float | None = None  # resources.cpus: CPU cores each machine must give
    min_driver: str | None = None  # the plan's NVIDIA driver floor (NVIDIA cards only)
    provisional: bool = False  # the floor depends on a torch the resolution has not decided yet

    @property
    def separate_machines(self) -> bool:
        """Each lot is a machine of its own: a job across lots talks over the network."""
        return self.lots > 1

    def host(self) -> str | None:
        """``64 GiB host memory, 8 CPUs`` when the profile declares either, else None."""
        parts = []
        if self.memory_gib is not None:
            parts.append(f"{self.memory_gib:g} GiB host memory")
        if self.cpus is not None:
            parts.append(f"{self.cpus:g} CPUs")
        return ", ".join(parts) or None

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
            "host_memory_gib": self.memory_gib,
            "host_cpus": self.cpus,
            "min_driver": self.min_driver,
            "min_driver_provisional": self.provisional and self.min_driver is not None,
            "separate_machines": self.separate_machines,
            "across_lots": ACROSS_LOTS if self.separate_machines else None,
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

    def machine(self) -> str | None:
        """What each machine of the order must have beyond its cards: ``h100: each machine: 64 GiB host
        memory, 8 CPUs, NVIDIA driver >= 580.95.05``; None when nothing is declared or derived."""
        driver = self.min_driver and f"NVIDIA driver >= {self.min_driver}"
        if driver and self.provisional:
            driver += f" ({PROVISIONAL})"
        parts = [p for p in (self.host(), driver) if p]
        return f"{self.card.id}: each machine: {', '.join(parts)}" if parts else None

    def across(self) -> str | None:
        """For more than one lot: ``the 2 lots may come as 2 separate machines (the provider's terms do not
        say): a job across machines needs torch.distributed over the network, not NVLink; ...``.

        The provider rents lots, not machines: whether N one-card lots land on one host is not stated, so
        this is never said as certain (``check --smi`` compares a capture with it: I-HW-LOTS)."""
        if not self.separate_machines:
            return None
        return (
            f"the {self.lots} lots may come as {self.lots} separate machines (the provider rents lots, and "
            f"does not say how they are placed): a job across machines needs {ACROSS_LOTS}; serving one "
            "model across lots is one server per lot (or a multi-node serving setup), and independent jobs "
            "run one per lot"
        )


def durations(plan: Plan) -> tuple[int, ...]:
    """The chosen duration, or every duration the provider rents for."""
    return (plan.days,) if plan.days is not None else load_catalog().terms.days


def order_lines(plan: Plan, *, provisional: bool = False) -> tuple[OrderLine, ...]:
    """One line per GPU target (the cpu pseudo-card is not ordered); ``provisional``: the plan's driver
    floor still depends on the torch the resolution installs (W-DRIVER-PROVISIONAL)."""
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
        lines.append(
            OrderLine(
                card=card,
                gpus=gpus,
                lots=lots,
                totals=totals,
                memory_gib=plan.profile.resources.memory_gib,
                cpus=plan.profile.resources.cpus,
                min_driver=plan.min_driver if card.vendor == "nvidia" else None,
                provisional=provisional,
            )
        )
    return tuple(lines)


def price_sources(plan: Plan) -> tuple[str, ...]:
    """``source (date)`` of every price used by the plan's order, sorted, without duplicates."""
    used = {t.price for line in order_lines(plan) for t in line.totals if t.price is not None}
    return tuple(sorted({f"{p.source} ({p.date})" for p in used}))


def summary_lines(plan: Plan, *, provisional: bool = False) -> list[str]:
    """One line per GPU target (lots, cards, total per duration), what each machine must have (host
    memory and CPUs when declared, the NVIDIA driver floor, marked when provisional), that several lots
    may be separate machines, the hours against each duration (``order.hours``), then where the prices
    come from."""
    order = order_lines(plan, provisional=provisional)
    lines = [line.summary() for line in order]
    lines += [text for line in order if (text := line.machine())]
    lines += [f"{line.card.id}: {text}" for line in order if (text := line.across())]
    lines += [f"hours: {text}" for text in hours_lines(plan, order)]
    sources = price_sources(plan)
    if lines:
        lines.append(
            f"prices: {'; '.join(sources)}" if sources else "prices: none known (--prices FILE.toml)"
        )
    return lines


def _h(value: float) -> str:
    """``48``, ``1.5``, ``24.7`` (hours, no float noise)."""
    return f"{round(value, 2):g}"


def hours_lines(plan: Plan, order: tuple[OrderLine, ...]) -> list[str]:
    """The hours the job needs (``[order] hours``, or ``--hours``) against each duration shown: what
    spare hours a duration leaves, with the order's price for it where a sourced price is known, or by how
    much it is exceeded and which longer duration to look at.  Never a price per hour: the provider
    prices durations, and an hourly figure would be invented.

    ``48 hours in a 3-day rental (72 hours) leaves 24 hours unused; h100: 1 x 47.14 USD = 47.14 USD``
    ``78 hours exceeds 3 days (72 hours) by 6 hours: look at 7 days or a smaller protocol``
    """
    hours = plan.profile.order.hours
    if hours is None or not order:
        return []
    rented = sorted(load_catalog().terms.days)
    lines = []
    for days in durations(plan):
        room = 24 * days
        if hours <= room:
            spare = room - hours
            left = f"leaves {_h(spare)} hours unused" if spare > 0 else "uses all of it"
            prices = "; ".join(
                f"{line.card.id}: {t.text}" for line in order for t in line.totals if t.days == days
            )
            lines.append(
                f"{_h(hours)} hours in a {days}-day rental ({room} hours) {left}"
                + (f"; {prices}" if prices else "")
            )
            continue
        longer = [d for d in rented if 24 * d >= hours]
        look = (
            f"look at {longer[0]} days or a smaller protocol"
            if longer
            else f"no rental holds it ({rented[-1]} days is the longest): split it into runs that each fit "
            "(checkpoint and resume) or a smaller protocol"
        )
        lines.append(
            f"{_h(hours)} hours exceeds {days} days ({room} hours) by {_h(hours - room)} hours: {look}"
        )
    return lines
