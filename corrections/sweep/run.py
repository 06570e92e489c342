"""The sweep's run: find standing decisions whose load-bearing read is a retracted fact version (or
whose premises or dispensing changed), re-decide them with the ask reasoner, and draft corrections
(verdict moved) or record reaffirmations; then settle the notices.

The stale set is a query, never a flag (corrections.sweep.staleness). A sweep cuts it into key ranges
of decision ids that every sweep of the same scope, on any machine, claims in the database
(corrections.sweep.claims): a range is swept page by page, each page locked (FOR UPDATE SKIP LOCKED),
re-checked and committed on its own (corrections.sweep.stale_page), so drafts start flowing before the
stale set is done, two sweeps split the work instead of doubling it, and a killed sweep's range is
taken over by another (re-decided decisions are superseded, so they drop out of the re-check by
themselves).

A page is normally written as a set (corrections.sweep.pages: decided in memory through
ask.services.decide over the page's beliefs, written with COPY); anything unusual sends that page
through the per-decision path (corrections.sweep.one_by_one), which writes the same rows. Then the
notice pass (corrections.sweep.notices). This module is the run loop only.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import enqueue, runlock, shutdown
from core.gc_pause import collection_paused
from core.retry import run_in_transaction

from .. import triggers
from ..models import SweepRun
from ..recall_letters import situations
from . import claims, faults, one_by_one, pages, staleness
from .decider import SharedDecider
from .notices import new_recall_facts, notice_pass, pending_notices_of, pending_notices_to_review, worsened_pairs
from .report import SweepReport, save_run_progress
from .stale_page import read_page
from .staleness import Scope

log = logging.getLogger(__name__)


def count_stale(fact_ids=None, patient_ids=None) -> int:
    return staleness.count_stale(Scope.of(fact_ids, patient_ids))


def page_size_default() -> int:
    return settings.UNSAY_SWEEP_PAGE_SIZE


def sweep(*, fact_ids=None, patient_ids=None, trigger=SweepRun.Trigger.MANUAL, dry_run=False, page_size=None,
          progress=None, notices=True, notices_progress=None, on_plan=None) -> SweepReport:
    """Sweep the stale set — all of it, or what changed facts (`fact_ids`: retracted and new
    versions) and changed dispensing (`patient_ids`) touch — then settle the letters of the exposed
    patients those changes reach: one reviewed letter per affected patient and recall (notices).

    The stale set is cut into key ranges that every sweep of the same scope claims in the database
    (corrections.sweep.claims): sweeps started at once, on one machine or many, share it, and a range
    whose sweep died is taken over. dry_run re-decides without writing anything (no decisions, drafts,
    run row or ranges) and returns a preview.
    progress: optional callable(n), called after each committed page with the decisions it re-decided.
    notices_progress: optional callable(done, total): recall facts whose patients have been settled
    (their notices committed), of how many (a recall looked at for its patients only counts one);
    first called with done = 0.
    on_plan: optional callable(plan), called once when this sweep has cut and committed a new plan of
    ranges (corrections.sweep.claims.Plan): helpers queued there join a plan that exists.
    """
    return Sweep(Scope.of(fact_ids, patient_ids), trigger=trigger, dry_run=dry_run,
                 page_size=page_size or page_size_default(), progress=progress).run(
        notices=notices, notices_progress=notices_progress, on_plan=on_plan)


class Sweep:
    """One sweep of one scope: its run row and run lock (none for a dry run), the decider and caches its
    pages share, the pages done so far and the report they add up to."""

    def __init__(self, scope: Scope, *, trigger, dry_run: bool, page_size: int, progress=None):
        self.scope, self.trigger, self.dry_run = scope, trigger, dry_run
        self.page_size, self.progress = page_size, progress
        self.total = SweepReport()
        self.decider = SharedDecider()
        self.caches = pages.SweepCaches()  # fact versions, letters and groups, shared by the set-based pages
        self.pages_done = 0
        self.sweep_run: SweepRun | None = None
        self._lock: runlock.RunLock | None = None

    def run(self, *, notices: bool = True, notices_progress=None, on_plan=None) -> SweepReport:
        if not self.dry_run:
            self._start()
        try:
            if self.dry_run:
                last = 0
                planned = staleness.all_stale_ids(self.scope)
                for start in range(0, len(planned), self.page_size):
                    last = self.page(planned[start:start + self.page_size])[0]
            else:
                last = self._sweep_ranges(on_plan)
            # Then keyset pages past the plan's last id: what went stale meanwhile (usually nothing).
            while True:
                last, rows = self.page(None, after=last)
                if rows < self.page_size:
                    break
                self._stop_if_asked()
            if notices:
                self._stop_if_asked()
                self.total.add(notice_pass(self.scope, self.decider, self.sweep_run, dry_run=self.dry_run,
                                           progress=notices_progress))
        except BaseException as exc:
            self._end(exc)
            raise
        else:
            self._end(None)
        return self.total

    def _start(self):
        abandon_dead_runs(covered_by=self.scope)
        with transaction.atomic():  # the run lock is taken before the row is visible (core.runlock)
            self.sweep_run = SweepRun.objects.create(
                trigger=self.trigger, fact_ids=list(self.scope.fact_ids or []),
                patient_ids=list(self.scope.patient_ids or []), heartbeat=timezone.now())
            self._lock = runlock.RunLock(RUN_LOCK, self.sweep_run.pk)
            self._lock.acquire()
        self.total.run = self.sweep_run

    def _end(self, exc: BaseException | None):
        run = self.sweep_run
        try:
            if run is None:
                return
            if exc is not None:
                text = (f"handed back: {exc}" if isinstance(exc, shutdown.HandedBack)
                        else f"{type(exc).__name__}: {exc}")
                runlock.end_run(SweepRun.objects.filter(pk=run.pk), SweepRun.Status.FAILED, error_text=text[:10000])
            else:
                runlock.end_run(SweepRun.objects.filter(pk=run.pk), SweepRun.Status.SUCCEEDED,
                                heartbeat=timezone.now())
                run.refresh_from_db()
        finally:
            if self._lock is not None:  # after the run's final status: a free lock never meets a 'running' row
                self._lock.release()

    def page(self, among, after: int = 0) -> tuple[int, int]:
        """One page, committed (a dry run writes nothing): `among`, a slice of the stale set read
        before, or None, the next keyset page after `after`. Returns (the page's last id, its rows)."""
        self.pages_done += 1
        if self.dry_run:
            report, after, rows = self._process_page(among, after)
        else:
            report, after, rows = run_in_transaction(self._process_page, among, after)
            faults.maybe_crash("after_commit", self.pages_done)
            faults.maybe_pause(self.pages_done)
        self.total.add(report)
        if self.progress and rows:
            self.progress(rows)
        return after, rows

    def _process_page(self, among, after) -> tuple[SweepReport, int, int]:
        """Lock, re-decide and write one page, in the caller's transaction. Returns (report, last id,
        rows in page)."""
        with collection_paused():  # the page's objects die by reference count; see core.gc_pause
            report = SweepReport()
            self.decider.reset()
            page = read_page(self.scope, among=among, after=after, limit=self.page_size, lock=not self.dry_run)
            if page is None:
                return report, (among[-1] if among else after), 0
            calls_before = self.decider.calls
            if not pages.write_set_based(page, self.decider, self.sweep_run, self.pages_done, report,
                                         dry_run=self.dry_run, caches=self.caches):
                one_by_one.redecide_page(page, self.decider, self.sweep_run, self.pages_done, report,
                                         dry_run=self.dry_run)
            report.reasoner_calls += self.decider.calls - calls_before
            report.pages += 1
            if self.sweep_run is not None:
                save_run_progress(self.sweep_run, report, last_id=page.ids[-1])
            faults.maybe_crash("before_commit", self.pages_done)
            return report, page.ids[-1], len(page.ids)

    def _sweep_ranges(self, on_plan=None) -> int:
        """Claim ranges of this scope's plan until none is free, and sweep each page by page (handing
        the rest back if a stop was asked for). Returns the plan's last decision id."""
        run = self.sweep_run
        plan = claims.plan_ranges(run, self.scope, self.page_size)
        if plan.run_id != run.pk:
            log.info("sweep run %s joins the plan of run %s (%d decisions left)", run.pk, plan.run_id,
                     plan.decisions)
        elif on_plan is not None:
            on_plan(plan)
        while True:
            held = claims.claim(run, plan.run_id)
            if held is None and claims.held_by_others(run, plan.run_id) and abandon_dead_runs(covered_by=self.scope):
                held = claims.claim(run, plan.run_id)  # a holder was dead: its range is free now
            if held is None:
                return plan.last_id
            ids = held.decision_ids
            for start in range(0, len(ids), self.page_size):
                self.page(ids[start:start + self.page_size])
                if not claims.renew(held, run):
                    log.warning("sweep run %s: range %s was taken over; leaving it", run.pk, held.pk)
                    break
                self._stop_if_asked()
            else:
                claims.finish(held)

    def _stop_if_asked(self) -> None:
        """Between pages: a stop was asked for (SIGTERM, core.shutdown), so hand the rest back. Every page
        so far is committed; what is left is still in the stale set, and notices are drafted by the next
        sweep (their dedupe keys make that safe)."""
        if shutdown.requested():
            raise shutdown.HandedBack(f"stopped on request (SIGTERM) after {self.pages_done} page(s), each committed; "
                                      "the next sweep continues with the rest of the stale set")


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
        try:  # by name: corrections.tasks imports this package (core.enqueue)
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


def has_work(fact_ids=None, patient_ids=None) -> bool:
    """Cheap pre-check for the after-commit triggers: anything to re-decide or notify?"""
    if staleness.any_stale(Scope.of(fact_ids, patient_ids)):
        return True
    if patient_ids:
        return bool(situations(patient_ids)) or bool(pending_notices_of(patient_ids))
    return (bool(worsened_pairs(fact_ids)) or bool(new_recall_facts(fact_ids))
            or bool(pending_notices_to_review(fact_ids)))
