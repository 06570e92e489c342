"""Sweeps share a stale set through key ranges claimed in the database, on any number of machines.

    plan = plan_ranges(run, scope, page_size)   # join the live plan of this scope, or read the stale set
    while (held := claim(run, plan.run_id)) is not None:
        ... sweep held.decision_ids page by page, renew(held, run) after each committed page ...
        finish(held)

A plan is the ranges one sweep cut its stale set into (`SweepRange.run` is that sweep's run). Every
sweep of the same scope that starts while the planner is running joins its plan instead of reading the
stale set again. Planning is serialised per scope by a transaction advisory lock (core.runlock); on an
engine without one two sweeps may each plan, and the pages' row locks still keep every decision
re-decided once (corrections.sweep.stale_page: FOR UPDATE SKIP LOCKED, re-checked, superseded under a guard).

A range is claimed with a conditional UPDATE on its claim count, so of two sweeps that saw it free
exactly one takes it. It is free while no one holds it, when its holder's lease ran out (no page
committed for UNSAY_SWEEP_HEARTBEAT_TIMEOUT seconds), or when its holder's run is no longer running:
ended, handed back on SIGTERM, or found dead through its run lock (corrections.sweep.run.abandon_dead_runs).
Taking over a range replays it: its committed pages' decisions are superseded and drop out of each
page's re-check, and drafts and outbox messages are exactly once per dedupe key.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from core import runlock

from ..models import SweepRange, SweepRun
from . import staleness
from .staleness import Scope

PLAN_LOCK = "sweep_plan"  # core.runlock kind: one planner per scope at a time


@dataclass(frozen=True)
class Plan:
    run_id: int      # the run whose ranges these are
    last_id: int     # keyset pages past this id find what went stale since the plan was cut (0: everything)
    ranges: int      # ranges this sweep cut (0: it joined a running plan)
    decisions: int   # decisions in the plan's unfinished ranges when this sweep started


def _same_scope(scope: Scope) -> dict:
    # SweepRun stores the scope as sorted id lists (corrections.sweep.run.sweep), so equal scopes are equal JSON.
    return {"run__fact_ids": list(scope.fact_ids or []), "run__patient_ids": list(scope.patient_ids or [])}


def _scope_key(scope: Scope) -> str:
    return f"f{','.join(map(str, scope.fact_ids or ()))};p{','.join(map(str, scope.patient_ids or ()))}"


def _lease() -> timedelta:
    return timedelta(seconds=settings.UNSAY_SWEEP_HEARTBEAT_TIMEOUT)


def plan_ranges(run: SweepRun, scope: Scope, page_size: int) -> Plan:
    """The plan this sweep works on: a running sweep's plan of the same scope; else an ended one that
    left ranges unfinished (its sweep died or was stopped: those ranges are taken over, then keyset
    pages from the first id find whatever else is stale); else a new one cut from the stale set now
    (UNSAY_SWEEP_RANGE_PAGES pages per range)."""
    with transaction.atomic():
        runlock.lock_for_transaction(PLAN_LOCK, _scope_key(scope))
        open_ranges = SweepRange.objects.filter(done_at__isnull=True, **_same_scope(scope)).exclude(run=run)
        live = open_ranges.filter(run__status=SweepRun.Status.RUNNING).order_by("run_id")
        joined = live.values_list("run_id", flat=True).first()
        ended = open_ranges.order_by("run_id").values_list("run_id", flat=True).first() if joined is None else None
        if joined is not None or ended is not None:
            plan_id = joined if joined is not None else ended
            mine = SweepRange.objects.filter(run_id=plan_id)
            left = sum(len(ids) for ids in mine.filter(done_at__isnull=True).values_list("decision_ids", flat=True))
            last = mine.aggregate(last=Max("last_id"))["last"] if joined is not None else 0
            return Plan(plan_id, last, 0, left)
        stale = staleness.all_stale_ids(scope)
        size = page_size * settings.UNSAY_SWEEP_RANGE_PAGES
        chunks = [stale[i:i + size] for i in range(0, len(stale), size)]
        SweepRange.objects.bulk_create(
            SweepRange(run=run, first_id=ids[0], last_id=ids[-1], decision_ids=ids) for ids in chunks)
        return Plan(run.pk, stale[-1] if stale else 0, len(chunks), len(stale))


def claim(run: SweepRun, plan_run_id: int) -> SweepRange | None:
    """Take the plan's first free range for `run` (see the module docstring), or None when every
    unfinished range is held by a live sweep (or none is left)."""
    now = timezone.now()
    candidates = (SweepRange.objects.filter(run_id=plan_run_id, done_at__isnull=True)
                  .values_list("id", "claims", "claimed_by_id", "lease_until", "claimed_by__status")
                  .order_by("first_id"))
    for range_id, claims, holder, lease_until, holder_status in candidates:
        free = (holder is None or holder_status != SweepRun.Status.RUNNING
                or lease_until is None or lease_until < now)
        if not free:
            continue
        # Conditional on the claim count seen: of two sweeps that saw this range free, one takes it.
        taken = SweepRange.objects.filter(pk=range_id, claims=claims, done_at__isnull=True).update(
            claimed_by=run, lease_until=now + _lease(), claims=F("claims") + 1)
        if taken == 1:
            return SweepRange.objects.get(pk=range_id)
    return None


def held_by_others(run: SweepRun, plan_run_id: int) -> bool:
    """Are unfinished ranges of the plan held by other sweeps (live, or dead and not found out yet)?"""
    return (SweepRange.objects.filter(run_id=plan_run_id, done_at__isnull=True)
            .exclude(claimed_by=run).exclude(claimed_by__isnull=True).exists())


def renew(held: SweepRange, run: SweepRun) -> bool:
    """A page of the range committed: the lease runs on. False: another sweep has taken the range over."""
    return SweepRange.objects.filter(pk=held.pk, claimed_by=run, done_at__isnull=True).update(
        lease_until=timezone.now() + _lease()) == 1


def finish(held: SweepRange) -> None:
    """Every page of the range has committed."""
    SweepRange.objects.filter(pk=held.pk, done_at__isnull=True).update(done_at=timezone.now())
