"""core.enqueue queues a task by its registered name: the loaded task's own delay() where the task module
is loaded (so eager mode and test doubles apply), the broker by name elsewhere; after commit, a broker
that is down is logged and the caller's committed work stands."""

import logging

import pytest
from celery import current_app
from django.db import transaction

from core import enqueue
from corrections import tasks, triggers
from outbox import tasks as outbox_tasks


def test_a_loaded_task_is_queued_through_its_own_delay(monkeypatch):
    calls = []
    monkeypatch.setattr(tasks.sweep_patients, "delay", lambda *a, **k: calls.append((a, k)))
    enqueue.send(triggers.SWEEP_PATIENTS, [1, 2])
    assert calls == [(([1, 2],), {})]


def test_a_task_not_loaded_here_is_sent_to_the_broker_by_name(monkeypatch):
    sent = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args=(), kwargs=None: sent.append((name, args, kwargs)))
    enqueue.send("elsewhere.tasks.job", 7, flag=True)
    assert sent == [("elsewhere.tasks.job", (7,), {"flag": True})]


@pytest.mark.django_db(transaction=True)
def test_on_commit_it_waits_for_the_commit_and_a_broker_down_is_only_logged(monkeypatch, caplog):
    calls = []
    monkeypatch.setattr(outbox_tasks.dispatch_outbox, "delay", lambda *a, **k: calls.append(a))
    with transaction.atomic():
        enqueue.send_on_commit(triggers.DISPATCH_OUTBOX)
        assert calls == []
    assert calls == [()]

    def down(*a, **k):
        raise ConnectionError("broker down")

    monkeypatch.setattr(outbox_tasks.dispatch_outbox, "delay", down)
    with caplog.at_level(logging.ERROR, logger="core.enqueue"), transaction.atomic():
        enqueue.send_on_commit(triggers.DISPATCH_OUTBOX)
    assert "could not queue corrections.tasks.dispatch_outbox" in caplog.text


def test_the_names_are_the_tasks_registered_names():
    # The outbox dispatch moved to outbox.tasks under its old registered name, which the broker and beat hold.
    assert {tasks.sweep_facts.name, tasks.sweep_patients.name, tasks.periodic_sweep.name,
            outbox_tasks.dispatch_outbox.name} == {triggers.SWEEP_FACTS, triggers.SWEEP_PATIENTS,
                                                   triggers.PERIODIC_SWEEP, triggers.DISPATCH_OUTBOX}
    assert outbox_tasks.dispatch_outbox.name == "corrections.tasks.dispatch_outbox"
