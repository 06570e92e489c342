"""What the sweeps a write set off did, in a line for the command that wrote it: `ingest_recalls` says what
its triggered sweeps did (or why none started), `escalate` waits for them and adds the drafts awaiting
review. Reads only; the tasks that run the sweeps are corrections.tasks."""

import time

from django.conf import settings

from core.health import celery_section

from .models import Correction, SweepRun
from .sweep.run import has_work
from .triggers import sweep_triggers_enabled


def _triggered_runs(since):
    """The sweep runs a write set off since `since`: neither the periodic sweep nor one run by hand."""
    return SweepRun.objects.filter(started__gte=since).exclude(
        trigger__in=[SweepRun.Trigger.BEAT, SweepRun.Trigger.MANUAL])


def describe_triggered_sweeps(since) -> str:
    """One line for commands that wrote facts (ingest_recalls, escalate): what the sweep they
    triggered did, or that it was queued and where to watch it, or why none started."""
    runs = list(_triggered_runs(since).order_by("id"))
    if runs:
        return "Sweep: " + "; ".join(
            f"run {r.id} {r.status}: examined {r.examined}, corrected {r.corrected}, reaffirmed {r.reaffirmed}, "
            f"notices drafted {r.notices}" for r in runs)
    if not sweep_triggers_enabled():
        return ("Sweep: none started (UNSAY_SWEEP_ON_SUPERSESSION is off here); run `manage.py sweep` "
                "or wait for the periodic sweep.")
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return "Sweep: nothing to re-decide or notify."
    return "Sweep: queued for the Celery worker; watch /recalls/ops/ (or `manage.py sweep --dry-run`)."


def sweep_worker_answers() -> tuple[bool, str]:
    """(will a Celery worker run a queued sweep now?, and if not, why): one ping of the broker's workers
    (core.health), as the health page asks."""
    celery = celery_section()["celery"]
    if celery.get("workers"):
        return True, ""
    return False, celery.get("error") or celery.get("note") or ""


def await_triggered_sweeps(since, fact_ids, *, timeout: float, poll: float = 0.5) -> str:
    """For commands that wrote facts and want the outcome (escalate): wait until the sweeps the change
    triggered have ended, up to `timeout` seconds, then say what they did and how many drafts await a
    pharmacist; or say why no sweep will run and how to sweep by hand."""
    by_hand = f"sweep by hand: `manage.py sweep{''.join(f' --fact {i}' for i in fact_ids)}`"
    if not sweep_triggers_enabled():
        return f"Sweep: none started (UNSAY_SWEEP_ON_SUPERSESSION is off here); {by_hand}."
    if not settings.CELERY_TASK_ALWAYS_EAGER:  # eager: the sweep already ran in this process
        if not has_work(fact_ids):
            return "Sweep: nothing to re-decide or notify."
        ready, why = sweep_worker_answers()
        if not ready:
            return (f"Sweep: queued, but no Celery worker answered{f' ({why})' if why else ''}; start one "
                    f"(`celery -A unsay_site worker`) or {by_hand}.")
        deadline = time.monotonic() + timeout
        triggered = _triggered_runs(since)
        while time.monotonic() < deadline:
            if triggered.exists() and not triggered.filter(status=SweepRun.Status.RUNNING).exists():
                break
            time.sleep(poll)
        else:
            return (f"Sweep: still running after {timeout:.0f}s on the Celery worker; watch /recalls/ops/ "
                    "and the review queue at /corrections/review/.")
    line = describe_triggered_sweeps(since)
    drafts = Correction.objects.filter(sweep_run__started__gte=since, status=Correction.Status.DRAFT).count()
    return f"{line}\nDrafts awaiting a pharmacist's review: {drafts} (/corrections/review/)."
