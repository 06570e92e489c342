"""Run locks (core/runlock.py) and what the dead-run check queues; real processes: test_run_locks_procs.py."""

import pytest
from django.db import connection
from django.utils import timezone

from core import runlock
from corrections.models import SweepRun
from recalls.models import IngestRun

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(connection.vendor != "postgresql", reason="advisory locks: PostgreSQL only")]


def test_a_held_run_lock_says_alive_and_a_free_one_dead():
    lock = runlock.RunLock("sweep_run", 987654)
    assert runlock.run_is_dead("sweep_run", 987654) is True
    assert lock.acquire() and lock.held
    try:
        assert runlock.run_is_dead("sweep_run", 987654) is False
        assert runlock.run_is_dead("ingest_run", 987654) is True  # another kind, another key
        assert runlock.run_is_dead("sweep_run", 987654) is False  # probing did not take it over
    finally:
        lock.release()
    assert runlock.run_is_dead("sweep_run", 987654) is True


def test_without_run_locks_nothing_is_claimed(settings):
    settings.UNSAY_RUN_LOCKS = False
    assert runlock.run_is_dead("sweep_run", 1) is None and runlock.dead_among("sweep_run", [1]) is None
    assert runlock.RunLock("sweep_run", 1).acquire() is False


@pytest.fixture
def queued(monkeypatch, settings):
    """Triggers on (as with a worker); what would be sent to the worker is recorded instead."""
    from corrections import tasks
    from recalls import tasks as recall_tasks

    settings.UNSAY_SWEEP_ON_SUPERSESSION = True
    settings.CELERY_TASK_ALWAYS_EAGER = False
    sent = []
    for name, task in (("sweep_facts", tasks.sweep_facts), ("sweep_patients", tasks.sweep_patients),
                       ("periodic_sweep", tasks.periodic_sweep), ("resume_ingest", recall_tasks.resume_ingest)):
        monkeypatch.setattr(task, "delay", lambda *args, _name=name: sent.append((_name, *args)))
    return sent


def test_a_dead_sweeps_scope_is_queued_again(queued, django_capture_on_commit_callbacks):
    from corrections.sweep.run import abandon_dead_runs

    now = timezone.now()
    facts = SweepRun.objects.create(trigger="supersession", fact_ids=[11, 12], heartbeat=now)
    patients = SweepRun.objects.create(trigger="dispensing", patient_ids=[5], heartbeat=now)
    everything = SweepRun.objects.create(trigger="beat", heartbeat=now)
    with django_capture_on_commit_callbacks(execute=True):
        assert abandon_dead_runs() == 3
    assert sorted(queued) == [("periodic_sweep",), ("sweep_facts", [11, 12]), ("sweep_patients", [5])]
    for run in (facts, patients, everything):
        run.refresh_from_db()
        assert run.status == SweepRun.Status.FAILED and "process is gone" in run.error_text


def test_a_sweep_of_everything_starting_queues_nothing_more(queued, django_capture_on_commit_callbacks):
    from corrections.sweep.run import abandon_dead_runs
    from corrections.sweep.staleness import Scope

    SweepRun.objects.create(trigger="supersession", fact_ids=[11], heartbeat=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        assert abandon_dead_runs(covered_by=Scope.of(None, None)) == 1
    assert queued == []


def test_a_dead_ingest_with_a_snapshot_is_queued_for_resumption(queued, django_capture_on_commit_callbacks):
    from recalls.runs import abandon_dead_runs

    now = timezone.now()
    archived = IngestRun.objects.create(source="api", started=now, heartbeat=now, snapshot_location="/tmp/x.json")
    IngestRun.objects.create(source="api", started=now, heartbeat=now)  # died before its snapshot was archived
    with django_capture_on_commit_callbacks(execute=True):
        assert abandon_dead_runs() == 2
    assert queued == [("resume_ingest", archived.pk)]
