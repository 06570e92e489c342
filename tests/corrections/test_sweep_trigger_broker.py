"""The change is the trigger: a committed fact or dispensing change puts its sweep on the real broker at
once (transaction.on_commit -> Celery task), and `manage.py escalate` shows the drafts a worker made of
it, or says that no worker is there and how to sweep by hand. Real Redis (REDIS_URL), real worker.
"""

import json
import os
import signal
import subprocess
import sys
import time
from base64 import b64decode

import pytest
from django.conf import settings
from django.core.management import call_command

from ask.services import ask
from tests.factories import LOT, escalate, make_patient
from tests.procs import PROJECT_DIR, subprocess_env

REDIS = os.environ.get("REDIS_URL")
pytestmark = [pytest.mark.usefixtures("dispatch_not_enqueued"), pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not REDIS or settings.CELERY_TASK_ALWAYS_EAGER,
                                 reason="needs a real Redis broker (REDIS_URL)")]
QUEUE = "celery"  # the queue the triggers publish to: the broker fixture gives each test its own


@pytest.fixture
def broker(monkeypatch, hashing_embeddings):
    """The real broker, with this test's tasks on a queue of its own: `make test` runs tests in parallel on
    one Redis database, and every test there that writes a fact or a dispensing row queues its tasks too."""
    import uuid

    import redis
    from celery import current_app

    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", None)  # as every profile: unset
    queue = f"test-triggers-{uuid.uuid4().hex[:12]}"
    monkeypatch.setattr(sys.modules[__name__], "QUEUE", queue)
    monkeypatch.setitem(current_app.conf, "task_default_queue", queue)
    client = redis.Redis.from_url(REDIS)
    client.delete(QUEUE)
    yield client
    client.delete(QUEUE)


def queued(client) -> list[tuple[str, list, dict]]:
    """(task name, args, kwargs) of every message waiting on the queue."""
    messages = []
    for raw in client.lrange(QUEUE, 0, -1):
        message = json.loads(raw)
        args, kwargs, _embed = json.loads(b64decode(message["body"]))
        messages.append((message["headers"]["task"], args, kwargs))
    return messages


def _recall_and_an_answer():
    from memory.fact_writes import assert_claim
    from tests.factories import recall_claim

    recall = assert_claim(recall_claim("D-0315-2019", LOT))
    patient = make_patient("SYN-T01", [("Valsartan Tablets USP 40 mg", LOT)])
    ask(patient, "Is my valsartan safe?")
    return recall, patient


def test_a_committed_fact_change_puts_its_sweep_on_the_broker_with_the_changed_fact_ids(broker):
    old, _patient = _recall_and_an_answer()
    broker.delete(QUEUE)
    new = escalate()  # its own transaction (memory.fact_writes); the tasks are published after its commit
    # The sweep of the changed facts, the embedding of the new version (docs/adr/0017) and the matching of the
    # shelf's units against it, nothing else: the writer itself does none of them.
    assert sorted(queued(broker)) == [("corrections.tasks.sweep_facts", [sorted([old.fact.pk, new.fact.pk])], {}),
                                      ("memory.tasks.embed_facts", [], {}),
                                      ("shelf.tasks.match_recall_facts", [[new.fact.pk]], {})]


def test_a_dispensing_change_puts_its_patients_sweep_on_the_broker(broker):
    from patients.dispensing import save_dispensing

    _recall, patient = _recall_and_an_answer()
    broker.delete(QUEUE)
    row = patient.dispensings.get()
    row.lot = "3095511"
    save_dispensing(row, actor="staff")
    assert queued(broker) == [("corrections.tasks.sweep_patients", [[patient.pk]], {})]


def test_escalate_without_a_worker_says_so_and_how_to_sweep_by_hand(broker, capsys):
    old, _patient = _recall_and_an_answer()
    call_command("escalate", "--recall-number", "D-0315-2019", "--classification", "Class I", "--wait", "5")
    out = capsys.readouterr().out
    assert "no Celery worker" in out and f"manage.py sweep --fact {old.fact.pk} --fact" in out, out


@pytest.mark.slow
def test_escalate_with_a_worker_up_shows_the_drafts_right_after(broker, capsys):
    from corrections.models import Correction
    from corrections.sweep_outcome import sweep_worker_answers

    _recall_and_an_answer()
    make_patient("SYN-T02", [("Valsartan Tablets USP 40 mg", LOT)])  # holds the lot, never asked: a notice
    broker.delete(QUEUE)
    # prefork, as deployed: the main process answers pings while its child sweeps (a solo pool would not).
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "unsay_site", "worker", "--pool", "prefork", "--concurrency", "1",
         "-Q", QUEUE,
         "--without-gossip", "--without-mingle", "-n", f"sweep-trigger-{os.getpid()}@%h", "--loglevel", "INFO"],
        cwd=PROJECT_DIR, env=subprocess_env(REDIS_URL=REDIS, UNSAY_CELERY_EAGER="0"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not sweep_worker_answers()[0]:
            assert worker.poll() is None and time.monotonic() < deadline, worker.stderr.read()[-3000:]
        call_command("escalate", "--recall-number", "D-0315-2019", "--classification", "Class I", "--wait", "120")
        out = capsys.readouterr().out
        assert "Drafts awaiting a pharmacist's review: 2" in out, out  # the correction and the notice
        assert "corrected 1" in out and "notices drafted 1" in out, out
        assert Correction.objects.filter(status="draft").count() == 2
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)


@pytest.mark.parametrize("profile", ["demo", "production"])
def test_the_triggers_are_on_in_the_demo_and_in_production_alike(profile):
    from tests.procs import run_python

    code = ("from django.conf import settings\n"
            "from corrections.tasks import sweep_triggers_enabled\n"
            "print(settings.PROFILE, sweep_triggers_enabled())\n")
    done = run_python(code, UNSAY_PROFILE=profile, REDIS_URL=REDIS, UNSAY_CELERY_EAGER="0",
                      SECRET_KEY="not-a-secret-only-a-test-of-the-profile-settings-0123456789")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [profile, "True"]
