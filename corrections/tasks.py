"""Celery tasks: thin wrappers over corrections.sweep.run, taking JSON ids (the outbox dispatch: outbox.tasks)."""

import contextlib
import logging

from celery import shared_task
from django.conf import settings
from django.db import OperationalError

from core import shutdown
from core.retry import RetriesExhausted
from recalls.runs import abandon_dead_runs as abandon_dead_ingests

from .models import SweepRun
from .sweep.run import abandon_dead_runs as abandon_dead_sweeps
from .sweep.run import has_work, sweep
from .triggers import (
    PERIODIC_SWEEP,
    SWEEP_FACTS,
    SWEEP_PATIENTS,
    suppressed,
    sweep_triggers_enabled,
    triggers_on,
)

log = logging.getLogger(__name__)


def enqueue_sweep_after_supersessions(sender=None, pairs=(), **kwargs):
    """Receiver of memory.signals.facts_changed: memory sends it once per committed
    transaction with every (retracted version, successor) pair, so the task never runs before the
    new versions are visible (or after a rollback), and one recall record or escalation is one sweep.

    With Celery in eager mode (no broker: tests without Redis) the task would run inline inside
    whatever wrote the fact, so there the trigger is opt-in (UNSAY_SWEEP_ON_SUPERSESSION=1); the
    periodic sweep and `manage.py sweep` still catch everything."""
    if not pairs or not triggers_on(settings) or suppressed():
        return
    # Retracted versions (their readers) and new versions (decisions whose premises they touch).
    fact_ids = sorted({fact_id for pair in pairs for fact_id in pair if fact_id})
    try:
        sweep_facts.delay(fact_ids)
    except Exception:  # the broker being down must not fail the ingest that already committed
        log.exception("could not enqueue the sweep for facts %s; the periodic sweep will catch it", fact_ids)


def enqueue_sweep_after_dispensing(sender=None, changes=(), **kwargs):
    """patients.dispensing.dispensing_changed receiver (sent after commit, once per transaction):
    one sweep for the patients whose dispensing changed."""
    patient_ids = sorted({patient_id for patient_id, _drug in changes})
    if not patient_ids or not sweep_triggers_enabled():
        return
    try:
        sweep_patients.delay(patient_ids)
    except Exception:  # the broker being down must not fail the write that already committed
        log.exception("could not enqueue the sweep for %d patients; the periodic sweep will catch it",
                      len(patient_ids))


def enqueue_sweep_after_supersession(old_fact_id: int, new_fact_id: int | None):
    """One supersession (the per-version hook's shape)."""
    enqueue_sweep_after_supersessions(pairs=[(old_fact_id, new_fact_id)])


# Only named transient failures are retried; the sweep itself is idempotent, so a retry is safe.
TRANSIENT = (RetriesExhausted, OperationalError)


@shared_task(name=SWEEP_FACTS, autoretry_for=TRANSIENT, max_retries=5, retry_backoff=30, retry_jitter=True)
def sweep_facts(fact_ids: list[int], helper: bool = False) -> str:
    if helper:  # a second pair of hands on a large stale set: ranges only, the first task drafts notices
        with _hand_back(sweep_facts, fact_ids, helper=True) as result:
            result.append(sweep(fact_ids=fact_ids, trigger=SweepRun.Trigger.SUPERSESSION, notices=False).summary())
        return result[0]
    if not has_work(fact_ids):
        return f"facts {fact_ids}: nothing to sweep"
    with _hand_back(sweep_facts, fact_ids) as result:
        result.append(sweep(fact_ids=fact_ids, trigger=SweepRun.Trigger.SUPERSESSION,
                            on_plan=lambda plan: _enqueue_helpers(fact_ids, plan)).summary())
    return result[0]


@contextlib.contextmanager
def _hand_back(task, *args, **kwargs):
    """The worker is stopping (SIGTERM, core.shutdown): the sweep committed its page and stopped; queue
    the same task again so the next worker continues at once (the stale set is what is left). Yields a
    list that holds the task's result, or the hand-back line."""
    result = []
    try:
        yield result
    except shutdown.HandedBack as exc:
        log.warning("%s handed back: %s", task.name, exc)
        try:  # to the queue it came from
            queue = (getattr(task.request, "delivery_info", None) or {}).get("routing_key")
            task.apply_async(args=args, kwargs=kwargs, **({"queue": queue} if queue else {}))
        except Exception:  # noqa: BLE001 - no broker: the periodic sweep finds the same stale set
            log.exception("could not queue %s again; the periodic sweep will continue it", task.name)
        result.append(f"handed back: {exc}")


def _enqueue_helpers(fact_ids: list[int], plan) -> int:
    """A stale set of more than one key range is shared by UNSAY_SWEEP_WORKERS sweeps: each helper joins
    the plan this sweep has just cut (corrections.sweep.claims) and claims ranges of it, so no decision is
    re-decided twice and a national recall reaches the pharmacists' queue sooner. Queued from the plan,
    not before the sweep: the plan is the stale set read once (reading its first ranges beforehand
    computed all of it, 1.5 s at 100,000 affected). Returns the number of helpers enqueued."""
    helpers = settings.UNSAY_SWEEP_WORKERS - 1
    if helpers < 1 or plan.ranges < 2:
        return 0
    try:
        for _ in range(helpers):
            sweep_facts.delay(fact_ids, helper=True)
    except Exception:  # no broker: this sweep does all the ranges itself
        log.exception("could not enqueue sweep helpers for facts %s; sweeping alone", fact_ids)
        return 0
    return helpers


@shared_task(name=SWEEP_PATIENTS, autoretry_for=TRANSIENT, max_retries=5, retry_backoff=30, retry_jitter=True)
def sweep_patients(patient_ids: list[int]) -> str:
    if not has_work(patient_ids=patient_ids):
        return f"{len(patient_ids)} patients: nothing to sweep"
    with _hand_back(sweep_patients, patient_ids) as result:
        result.append(sweep(patient_ids=patient_ids, trigger=SweepRun.Trigger.DISPENSING).summary())
    return result[0]


@shared_task(name=PERIODIC_SWEEP, autoretry_for=TRANSIENT, max_retries=3, retry_backoff=60, retry_jitter=True)
def periodic_sweep() -> str:
    with _hand_back(periodic_sweep) as result:
        result.append(sweep(trigger=SweepRun.Trigger.BEAT).summary())
    return result[0]


def reap_dead_runs() -> int:
    """The periodic check (every minute, with the outbox dispatch): sweep and ingest runs still 'running'
    whose process is gone (run lock free; heartbeat timeout on CockroachDB) are marked abandoned and
    their work queued again. Returns how many were found."""
    found = 0
    for reap in (abandon_dead_sweeps, abandon_dead_ingests):
        try:
            found += reap()
        except Exception:  # noqa: BLE001 - never let the check stop the outbox
            log.exception("checking for dead runs failed (%s)", reap.__module__)
    return found
