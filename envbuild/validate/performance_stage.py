"""The ``performance`` stage's run: the device figures, the all-reduce sweeps (on this machine, and with
``--fleet`` across the lots after envbuild's handshake), judged by :mod:`envbuild.validate.performance`.
"""

from __future__ import annotations

from dataclasses import replace

from envbuild.catalog.perf_rows import PerformanceFile, load_performance
from envbuild.report.model import StageResult
from envbuild.validate import fleet_serve, rendezvous
from envbuild.validate.hardware_stage import read_live, split_fix
from envbuild.validate.load_samples import Sampler, UnderLoad, judge_under_load
from envbuild.validate.performance import decide_performance, judge_fleet
from envbuild.validate.stage_context import StageContext, probe


def run_performance(ctx: StageContext) -> StageResult:
    """The device figures in the warm worker, then an all-reduce sweep with one process per device (two
    gloo processes on the CPU), and with ``--fleet`` one across the lots; judged against the datasheet."""
    # 85 % of the budget is measured; the rest pays for starting the rank processes and tearing down.
    budget = ctx.perf_budget_s * 0.85
    world = ctx.device_count if ctx.gpu else (1 if ctx.fleet else 2)
    shares = {"devices": 0.7 if world > 1 or ctx.fleet else 1.0}
    if world > 1:
        shares["local"] = 0.3 if not ctx.fleet else 0.15
    if ctx.fleet:
        shares["fleet"] = 1.0 - sum(shares.values())
    args = {
        "devices": ctx.device_names(),
        "budget_s": budget * shares["devices"],
    }
    under = None
    if ctx.gpu:  # the vendor tools read once a second while the probe keeps the devices busy
        with Sampler(lambda: read_live(ctx.lock.backend)) as sampler:
            figures = probe(ctx, "performance", "performance", args, warm=True)
        under = judge_under_load(ctx.lock, sampler.samples, sampler.errors)
    else:
        figures = probe(ctx, "performance", "performance", args, warm=True)
    backend = "nccl" if ctx.gpu else "gloo"  # torch's "nccl" is RCCL on ROCm
    max_bytes = (256 << 20) if ctx.gpu else (32 << 20)
    collectives = None
    if world > 1:
        sweep = {
            "world": world,
            "backend": backend,
            "budget_s": budget * shares["local"],
            "max_bytes": max_bytes,
            "limit_s": _sweep_limit(ctx),
        }
        collectives = probe(ctx, "performance", "collectives", sweep)
    data = load_performance()
    res = decide_performance(ctx.lock, figures, collectives, data)
    if under is not None:
        res = with_load(res, under)
    if ctx.fleet is None:
        return res
    return _with_fleet(ctx, res, data, budget * shares["fleet"], backend, max_bytes)


def _with_fleet(
    ctx: StageContext, res: StageResult, data: PerformanceFile, budget: float, backend: str, max_bytes: int
) -> StageResult:
    """The lots' all-reduce (``--fleet``): envbuild's handshake, then one rank per lot, whose proofs of
    the token (an all-gather over the group) come before anything is measured."""
    spec = ctx.fleet
    assert spec is not None
    facts: dict[str, object] = {
        "node_rank": spec.rank,
        "nodes": spec.nodes,
        "address": spec.address,
        "transport": rendezvous.TRANSPORT_NOTE,
    }
    warnings = list(res.facts.get("warnings") or [])
    if spec.rank == 0 and (public := rendezvous.public_address_warning(spec)):
        warnings.append(public)
    wait = ctx.timeout("performance") / 2
    try:
        group = fleet_serve.serve(spec, wait) if spec.rank == 0 else rendezvous.join(spec, wait)
    except rendezvous.FleetError as exc:
        fleet = {**facts, "error": str(exc)}
        hint = f"open {rendezvous.ports_to_open(spec)}, and start every lot with the same --fleet"
        return _failed(res, {**res.facts, "fleet": fleet, "warnings": warnings}, str(exc), hint)
    args = {
        "world": spec.nodes,
        "rank": spec.rank,
        "store": group.store,  # node 0's rank binds it to HOST only (probe_collectives.py)
        "proofs": list(group.proofs),
        "backend": backend,
        "budget_s": budget,
        "timeout_s": 60.0,
        "max_bytes": max_bytes,
        "limit_s": _sweep_limit(ctx),
    }
    sweep = probe(ctx, "performance", "collectives", args)
    unproven = [int(r) for r in sweep.get("unproven") or []]
    if unproven:  # a stranger reached torch's store: nothing measured in that group is kept
        fleet = {**facts, "peers": list(group.peers), "all_reduce": {**sweep, "sizes": []}, "network": None}
        error = (
            f"--fleet: rank(s) {', '.join(map(str, unproven))} of the group could not prove the fleet token "
            f"(something other than the admitted lots reached torch's store at {group.store}); admitted: "
            f"{group.admitted}; no figure from this group is kept"
        )
        hint = f"allow only the other lots to reach node 0 ({rendezvous.ports_to_open(spec)})"
        return _failed(res, {**res.facts, "fleet": fleet, "warnings": warnings}, error, hint)
    judged = judge_fleet(ctx.lock, sweep, data)
    fleet = {
        **facts,
        "peers": list(group.peers),
        "all_reduce": sweep,
        "network": judged.row() if judged else None,
    }
    facts_out = {**res.facts, "fleet": fleet, "warnings": warnings}
    if sweep.get("errors") or not sweep.get("sums_ok"):
        why = "; ".join(sweep.get("errors") or []) or "the lots' all-reduce returned wrong sums"
        error = f"--fleet all-reduce across {spec.nodes} lots failed: {why}"
        return _failed(res, facts_out, error, f"open {rendezvous.ports_to_open(spec)}")
    if judged is not None and judged.ok is False:
        hint = (
            "the network between the lots is slower than the profile needs: ask the provider for the "
            "lots' interconnect (InfiniBand/RoCE, not the public network), and set NCCL_SOCKET_IFNAME / "
            "GLOO_SOCKET_IFNAME to that interface"
        )
        return _failed(res, facts_out, judged.problem(), hint)
    return replace(res, facts=facts_out, hint=_noted(res.hint))


def _failed(res: StageResult, facts: dict[str, object], error: str, hint: str) -> StageResult:
    """The stage failed by the fleet (unless a figure already failed it: its error comes first)."""
    return replace(res, status="failed", facts=facts, error=res.error or error, hint=_noted(res.hint or hint))


def _noted(hint: str | None) -> str:
    """The stage's hint, and that the lots' traffic is not protected (:data:`rendezvous.TRANSPORT_NOTE`)."""
    return f"{hint}; {rendezvous.TRANSPORT_NOTE}" if hint else rendezvous.TRANSPORT_NOTE


def _sweep_limit(ctx: StageContext) -> float:
    """The all-reduce probe's own limit: within the stage's per-probe timeout (--timeout performance), so
    that the probe stops its ranks and reports what they measured before it is killed itself.  The
    sweep's budget starts once the group has formed, so the start-up is no longer inside the budget."""
    return ctx.timeout("performance") * 0.9


def with_load(res: StageResult, under: UnderLoad) -> StageResult:
    """The readings under load in the stage's facts; an error among their findings fails the stage
    (unless a figure already did), a warning joins the stage's warnings."""
    warnings = [
        *(res.facts.get("warnings") or []),
        *(f"{f.code}: {f.message}" for f in under.findings if f.severity == "warning"),
    ]
    facts = {**res.facts, "under_load": under.facts, "warnings": warnings}
    errors = [f for f in under.findings if f.severity == "error"]
    if errors and res.status == "passed":
        what, fix = split_fix(errors[0].message)
        return replace(res, status="failed", facts=facts, error=f"{errors[0].code}: {what}", hint=fix)
    return replace(res, facts=facts)
