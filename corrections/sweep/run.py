"""The sweep: find standing decisions whose load-bearing read is a retracted fact version, re-decide
them with the ask reasoner, and draft corrections (verdict moved) or record reaffirmations.

The stale set is a query, never a flag. A sweep cuts it into key ranges of decision ids that every
sweep of the same scope, on any machine, claims in the database (corrections.sweep_claims): a range is
swept page by page, each page locked (FOR UPDATE SKIP LOCKED), re-checked and committed on its own, so
drafts start flowing before the stale set is done, two sweeps split the work instead of doubling it,
and a killed sweep's range is taken over by another (re-decided decisions are superseded, so they drop
out of the re-check by themselves).

A page is normally written as a set (corrections.sweep_pages: decided in
memory through ask.services.decide over the page's beliefs, written with COPY); anything unusual sends
that page through the per-decision path (corrections.redecide), which writes the same rows. This
module is the run loop only: notices are corrections.notices, fault injection corrections.faults.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from core import enqueue, runlock, shutdown
from core.gc_pause import collection_paused
from core.retry import is_retryable, run_in_transaction
from memory.decisions import DecisionAlreadySuperseded
from memory.models import Decision, Fact
from patients.selectors import attach_patients

from . import faults, staleness, triggers
from .models import SweepRun
from .notices import (
    new_recall_facts,
    pending_notices_of,
    pending_notices_to_review,
    recall_checks,
    settle_recall,
    worsened_pairs,
)
from .recall_letters import situations
from .redecide import (
    SharedDecider,
    SweepReport,
    page_reasons,
    pending_corrections,
    redecide,
    save_run_progress,
    set_page_snapshot,
)
from .staleness import Scope

log = logging.getLogger(__name__)


def count_stale(fact_ids=None, patient_ids=None) -> int:
    return staleness.count_stale(Scope.of(fact_ids, patient_ids))


def _process_page(ids_after, limit, scope: Scope, decider, run, page_no, *, dry_run,
                  caches=None, among=None) -> tuple[SweepReport, int, int]:
    """Lock, re-decide and write one page. Returns (report, last id, rows in page).

    `among`: the page's slice of the stale set read when the sweep began (its ids are checked again
    and locked here); None: the next keyset page of the stale set as it is now."""
    with collection_paused():  # the page's objects die by reference count; see core.gc_pause
        return _page(ids_after, limit, scope, decider, run, page_no, dry_run=dry_run, caches=caches, among=among)


# Timestamps no re-decision reads (a page parses ~4 per decision otherwise); a new decision replaces the
# old one by its id, and a letter names the patient, not when they were registered.
_PAGE_UNREAD = ("decided_at", "superseded_at", "created")
_PATIENT_UNREAD = ("created", "updated")


def _page(ids_after, limit, scope: Scope, decider, run, page_no, *, dry_run, caches, among):
    report = SweepReport()
    if not dry_run:
        set_page_snapshot()
    decider.reset()
    if among is not None:
        ids, raw_reasons = staleness.lock_stale_among(among, scope, lock=not dry_run)
    else:
        ids = staleness.stale_decision_ids(after=ids_after, limit=limit, scope=scope, lock=not dry_run)
        raw_reasons = None
    if not ids:
        return report, (among[-1] if among else ids_after), 0
    # The page's patients in one more query (a decision holds its patient by id: patients.selectors).
    decisions = attach_patients(Decision.objects.filter(id__in=ids).defer(*_PAGE_UNREAD).order_by("id"),
                                defer=_PATIENT_UNREAD)
    reasons = page_reasons(decisions, scope, raw=raw_reasons)
    pending = pending_corrections(ids, lock=not dry_run)
    calls_before = decider.calls
    if _set_based_page(decisions, reasons, pending, decider, run, page_no, report, dry_run=dry_run,
                       caches=caches):
        return _finish_page(report, decider, calls_before, run, ids, page_no)
    drafted_keys: set[str] = set()
    decider.preload({d.patient_id for d in decisions if d.patient_id})
    latest: dict[int, Fact | None] = {}
    for n, decision in enumerate(decisions):
        if n == len(decisions) // 2:
            faults.maybe_crash("mid_page", page_no)
        one = SweepReport()  # counted only once its writes succeeded
        try:
            if dry_run:
                redecide(decision, reasons[decision.id], decider, run, one, dry_run=True,
                          pending=pending.get(decision.id), latest=latest, drafted_keys=drafted_keys)
            else:
                with transaction.atomic():  # savepoint: one bad decision does not sink the page
                    redecide(decision, reasons[decision.id], decider, run, one, dry_run=False,
                              pending=pending.get(decision.id), latest=latest, drafted_keys=drafted_keys)
            report.add(one)
        except (DecisionAlreadySuperseded, IntegrityError) as exc:
            # Another sweep got there first (or the same draft already exists): already handled.
            log.info("decision %s already handled: %s", decision.id, exc)
            report.already_handled += 1
        except Exception as exc:  # noqa: BLE001 - recorded on the run; the decision stays standing
            if is_retryable(exc):
                # A conflict with another sweep (two writing the same new read set: memory.read_sets.store)
                # is no failure of this decision: the whole page again, on a new snapshot.
                raise
            log.exception("re-deciding decision %s failed", decision.id)
            report.errors += 1
            report.error_text.append(f"decision {decision.id}: {type(exc).__name__}: {exc}")
    return _finish_page(report, decider, calls_before, run, ids, page_no)


def _finish_page(report, decider, calls_before, run, ids, page_no):
    report.reasoner_calls += decider.calls - calls_before
    report.pages += 1
    if run is not None:
        save_run_progress(run, report, last_id=ids[-1])
    faults.maybe_crash("before_commit", page_no)
    return report, ids[-1], len(ids)


def _set_based_page(decisions, reasons, pending, decider, run, page_no, report, *, dry_run, caches=None) -> bool:
    """The page as a set (corrections.sweep_pages), in a savepoint. False: take the per-decision
    path for this page (refused up front, or anything unusual rolled back)."""
    from . import sweep_pages

    why = sweep_pages.per_decision_reason(decider, decisions, pending, dry_run=dry_run)
    if why:
        if not dry_run:
            log.info("sweep page %d takes the per-decision path: %s", page_no, why)
        return False
    calls_before = decider.calls
    caches = caches or sweep_pages.SweepCaches()
    one = SweepReport()
    try:
        with transaction.atomic():
            plans, beliefs = sweep_pages.plan_page(decisions, reasons, decider,
                                                   fact_cache=caches.facts, groups=caches.groups)
            faults.maybe_crash("mid_page", page_no)
            sweep_pages.write_page(plans, beliefs, run, one, letters=caches.letters)
    except (DecisionAlreadySuperseded, IntegrityError, sweep_pages.PageFallback) as exc:
        log.info("sweep page %d falls back to the per-decision path: %s", page_no, exc)
    except Exception as exc:  # noqa: BLE001 - the per-decision path records the failure per decision
        if is_retryable(exc):
            raise  # the whole page again, on a new snapshot (run_in_transaction)
        log.exception("sweep page %d falls back to the per-decision path", page_no)
    else:
        one.set_pages = 1
        report.add(one)
        return True
    decider.calls = calls_before  # what the per-decision path calls is what counts
    decider.reset()
    return False


RUN_LOCK = "sweep_run"  # core.runlock kind: a live sweep holds the advisory lock of its run id


def abandon_dead_runs(*, resume: bool = True, covered_by: Scope | None = None) -> int:
    """Runs still 'running' whose process is gone: mark them failed so the operations page stops
    showing them as live, and resume their work. Their work is not lost: the stale set still has it.

    On PostgreSQL a live sweep holds the advisory lock of its run id (core.runlock), so a killed one is
    seen at once; on CockroachDB (no advisory locks) a run is dead once its heartbeat is older than
    UNSAY_SWEEP_HEARTBEAT_TIMEOUT. resume: queue a sweep of each dead run's scope (when triggers run
    on a worker), unless `covered_by` (the sweep about to start) covers everything anyway."""
    cutoff = timezone.now() - timedelta(seconds=settings.UNSAY_SWEEP_HEARTBEAT_TIMEOUT)
    dead, by_lock = runlock.dead_runs(RUN_LOCK, SweepRun.objects.filter(status=SweepRun.Status.RUNNING),
                                      Q(heartbeat__lt=cutoff))
    why = ("abandoned: its process is gone (its run lock was free)" if by_lock
           else "abandoned: no heartbeat (process killed?)") + "; a later sweep picks up its remaining work"
    runs = list(dead.only("id", "fact_ids", "patient_ids"))
    if not runs:
        return 0
    count = runlock.end_run(SweepRun.objects.filter(pk__in=[r.pk for r in runs]), SweepRun.Status.FAILED,
                            error_text=why)
    log.warning("sweep runs %s: %s", [r.pk for r in runs], why)
    if resume and not (covered_by is not None and covered_by.everything):
        transaction.on_commit(lambda: resume_runs(runs))
    return count


def resume_runs(runs) -> int:
    """Queue a sweep of each run's scope (facts, patients or everything) for the worker. Without a
    worker (Celery eager) nothing is queued: the next `manage.py sweep` or periodic sweep finds the
    same stale set. Returns the number queued."""
    if not triggers.sweep_triggers_enabled():
        return 0
    queued = 0
    for run in runs:
        try:  # by name: corrections.tasks imports this module (core.enqueue)
            if run.patient_ids:
                enqueue.send(triggers.SWEEP_PATIENTS, list(run.patient_ids))
            elif run.fact_ids:
                enqueue.send(triggers.SWEEP_FACTS, list(run.fact_ids))
            else:
                enqueue.send(triggers.PERIODIC_SWEEP)
            queued += 1
        except Exception:  # noqa: BLE001 - no broker: the periodic sweep still finds the stale set
            log.exception("could not queue the resumption of sweep run %s", run.pk)
    return queued


def page_size_default() -> int:
    return settings.UNSAY_SWEEP_PAGE_SIZE


def sweep(*, fact_ids=None, patient_ids=None, trigger=SweepRun.Trigger.MANUAL, dry_run=False, page_size=None,
          progress=None, notices=True, notices_progress=None, on_plan=None) -> SweepReport:
    """Sweep the stale set — all of it, or what changed facts (`fact_ids`: retracted and new
    versions) and changed dispensing (`patient_ids`) touch — then settle the letters of the exposed
    patients those changes reach: one reviewed letter per affected patient and recall (notices).

    The stale set is cut into key ranges that every sweep of the same scope claims in the database
    (corrections.sweep_claims): sweeps started at once, on one machine or many, share it, and a range
    whose sweep died is taken over. dry_run re-decides without writing anything (no decisions, drafts,
    run row or ranges) and returns a preview.
    progress: optional callable(n), called after each committed page with the decisions it re-decided.
    notices_progress: optional callable(done, total): recall facts whose patients have been settled
    (their notices committed), of how many (a recall looked at for its patients only counts one);
    first called with done = 0.
    on_plan: optional callable(plan), called once when this sweep has cut and committed a new plan of
    ranges (corrections.sweep_claims.Plan): helpers queued there join a plan that exists.
    """
    scope = Scope.of(fact_ids, patient_ids)
    fact_ids = list(scope.fact_ids) if scope.fact_ids else None
    page_size = page_size or page_size_default()
    total = SweepReport()
    run = None
    lock = None
    if not dry_run:
        abandon_dead_runs(covered_by=scope)
        with transaction.atomic():  # the run lock is taken before the row is visible (core.runlock)
            run = SweepRun.objects.create(trigger=trigger, fact_ids=fact_ids or [],
                                          patient_ids=list(scope.patient_ids or []), heartbeat=timezone.now())
            lock = runlock.RunLock(RUN_LOCK, run.pk)
            lock.acquire()
        total.run = run
    decider = SharedDecider()
    from .sweep_pages import SweepCaches

    caches = SweepCaches()  # fact versions and letters, shared by the set-based pages
    page_no = [0]

    def page(among, after=0):
        page_no[0] += 1
        if dry_run:
            report, after, rows = _process_page(after, page_size, scope, decider, None, page_no[0], dry_run=True,
                                                among=among)
        else:
            report, after, rows = run_in_transaction(
                _process_page, after, page_size, scope, decider, run, page_no[0], dry_run=False,
                caches=caches, among=among)
            faults.maybe_crash("after_commit", page_no[0])
            faults.maybe_pause(page_no[0])
        total.add(report)
        if progress and rows:
            progress(rows)
        return after, rows

    try:
        if dry_run:
            last = 0
            planned = staleness.all_stale_ids(scope)
            for start in range(0, len(planned), page_size):
                last = page(planned[start:start + page_size])[0]
        else:
            last = _sweep_ranges(run, scope, page_size, page, stop=lambda: _stop_if_asked(page_no[0]),
                                 on_plan=on_plan)
        # Then keyset pages past the plan's last id: what went stale meanwhile (usually nothing).
        while True:
            last, rows = page(None, after=last)
            if rows < page_size:
                break
            _stop_if_asked(page_no[0])
        if notices:
            _stop_if_asked(page_no[0])
            notice_no = [0]
            decider.reset()
            calls_before = decider.calls
            notice_report = SweepReport()
            # Every recall whose patients are looked at, known before the first is settled: every
            # exposed patient found affected ends with one reviewed letter about it (notices).
            checks = recall_checks(fact_ids, scope.patient_ids, by_facts=bool(scope.fact_ids or scope.everything))
            units, done = sum(check.size for check in checks), 0
            if notices_progress:
                notices_progress(0, units)
            for check in checks:
                settle_recall(check, decider, run, notice_report, dry_run=dry_run, notice_no=notice_no)
                done += check.size
                if notices_progress:
                    notices_progress(done, units)
            notice_report.reasoner_calls = decider.calls - calls_before
            if run is not None and notice_report.reasoner_calls:
                save_run_progress(run, SweepReport(reasoner_calls=notice_report.reasoner_calls,
                                                    already_handled=notice_report.already_handled))
            total.add(notice_report)
    except BaseException as exc:
        if run is not None:
            text = f"handed back: {exc}" if isinstance(exc, shutdown.HandedBack) else f"{type(exc).__name__}: {exc}"
            runlock.end_run(SweepRun.objects.filter(pk=run.pk), SweepRun.Status.FAILED, error_text=text[:10000])
        raise
    else:
        if run is not None:
            runlock.end_run(SweepRun.objects.filter(pk=run.pk), SweepRun.Status.SUCCEEDED, heartbeat=timezone.now())
            run.refresh_from_db()
    finally:
        if lock is not None:  # after the run's final status: a free lock never meets a 'running' row
            lock.release()
    return total


def _sweep_ranges(run, scope: Scope, page_size: int, page, *, stop, on_plan=None) -> int:
    """Claim ranges of this scope's plan until none is free, and sweep each page by page (`page`: one
    committed page of the given ids; `stop`: hands the rest back if a stop was asked for). Returns the
    plan's last decision id."""
    from . import sweep_claims

    plan = sweep_claims.plan_ranges(run, scope, page_size)
    if plan.run_id != run.pk:
        log.info("sweep run %s joins the plan of run %s (%d decisions left)", run.pk, plan.run_id, plan.decisions)
    elif on_plan is not None:
        on_plan(plan)
    while True:
        held = sweep_claims.claim(run, plan.run_id)
        if held is None and sweep_claims.held_by_others(run, plan.run_id) and abandon_dead_runs(covered_by=scope):
            held = sweep_claims.claim(run, plan.run_id)  # a holder was dead: its range is free now
        if held is None:
            return plan.last_id
        ids = held.decision_ids
        for start in range(0, len(ids), page_size):
            page(ids[start:start + page_size])
            if not sweep_claims.renew(held, run):
                log.warning("sweep run %s: range %s was taken over; leaving it", run.pk, held.pk)
                break
            stop()
        else:
            sweep_claims.finish(held)


def _stop_if_asked(page_no: int) -> None:
    """Between pages: a stop was asked for (SIGTERM, core.shutdown), so hand the rest back. Every page
    so far is committed; what is left is still in the stale set, and notices are drafted by the next
    sweep (their dedupe keys make that safe)."""
    if shutdown.requested():
        raise shutdown.HandedBack(f"stopped on request (SIGTERM) after {page_no} page(s), each committed; "
                                  "the next sweep continues with the rest of the stale set")


def has_work(fact_ids=None, patient_ids=None) -> bool:
    """Cheap pre-check for the after-commit triggers: anything to re-decide or notify?"""
    if staleness.any_stale(Scope.of(fact_ids, patient_ids)):
        return True
    if patient_ids:
        return bool(situations(patient_ids)) or bool(pending_notices_of(patient_ids))
    return (bool(worsened_pairs(fact_ids)) or bool(new_recall_facts(fact_ids))
            or bool(pending_notices_to_review(fact_ids)))
