"""What ``report fleet`` reads of the performance stage: each lot's figures, and its place in a
``validate --fleet`` group (``"1 of 2 at host:29500"``), whose reports must hold each rank once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def node_of(fleet: object) -> str | None:
    """``"R of N at ADDRESS"`` from the performance stage's ``fleet`` facts, or None (no --fleet)."""
    if not isinstance(fleet, dict) or "node_rank" not in fleet:
        return None
    return f"{fleet['node_rank']} of {fleet.get('nodes')} at {fleet.get('address')}"


def figures_of(facts: dict[str, Any]) -> dict[str, float]:
    """The performance stage's figures by name (unit, figure, where), and the all-reduce across lots."""
    out = {
        f"{f['unit']} {f['figure']} {f['where']}": float(f["measured"])
        for f in facts.get("figures") or []
        if isinstance(f, dict) and isinstance(f.get("measured"), (int, float))
    }
    network = (facts.get("fleet") or {}).get("network")
    if isinstance(network, dict) and isinstance(network.get("measured"), (int, float)):
        out["GB/s all_reduce_busbw across lots"] = float(network["measured"])
    return out


@dataclass(frozen=True)
class Group:
    address: str
    lots: tuple[str, ...]
    ranks: tuple[int, ...]  # the ranks the reports hold, sorted
    nodes: int


def incomplete(nodes: list[tuple[str, str | None]]) -> list[Group]:
    """The groups (by address) whose lots (``(lot, node_of)``) do not hold each rank 0..N-1 once."""
    members: dict[str, list[tuple[str, int, int]]] = {}
    for lot, node in nodes:
        if node:
            rank, _, rest = node.partition(" of ")
            count, _, address = rest.partition(" at ")
            members.setdefault(address, []).append((lot, int(rank), int(count)))
    out = []
    for address, found in members.items():
        size = max(n for _, _, n in found)
        ranks = tuple(sorted(r for _, r, _ in found))
        if ranks != tuple(range(size)):
            out.append(Group(address, tuple(lot for lot, _, _ in found), ranks, size))
    return out
