"""Dead runs seen at once, stopped runs handed back: real processes (tests/procs.py) on the real database.

A live sweep or ingest run holds the PostgreSQL advisory lock of its run id (core/runlock.py): a run
SIGKILLed from outside is marked abandoned by the next check within seconds (not after the 600 s
heartbeat timeout), and the next run finishes its work exactly once. SIGTERM (core/shutdown.py) makes
`manage.py sweep`, `manage.py ingest_recalls` and a Celery worker finish the page or chunk in flight,
mark the run handed back and leave the rest for the next run.
"""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from django.db import connection

from corrections.models import SweepRun
from corrections.sweep.run import abandon_dead_runs, count_stale
from corrections.tasks import reap_dead_runs
from demo.slice import DEMO_SLICE
from recalls.models import IngestRun
from recalls.services import ingest_file
from recalls.tasks import resume_ingest
from tests.corrections.test_sweep_crash import AFFECTED, assert_exactly_once_and_complete, escalated  # noqa: F401
from tests.procs import PROJECT_DIR, subprocess_env

pytestmark = [pytest.mark.usefixtures("dispatch_not_enqueued"), pytest.mark.django_db(transaction=True),
              pytest.mark.slow,
              pytest.mark.skipif(connection.vendor != "postgresql", reason="advisory locks: PostgreSQL only")]

NO_TRIGGERS = {"UNSAY_SWEEP_ON_SUPERSESSION": "0"}
DETECTED_WITHIN = 5.0  # seconds from the SIGKILL to the run marked abandoned


def start_manage(*args, **env_extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=PROJECT_DIR,
                            env=subprocess_env(**NO_TRIGGERS, **env_extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate, timeout, what, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited {proc.returncode}: {proc.stderr.read()[-3000:]}")
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout}s")


def seconds_until_abandoned(model, run_id, check) -> float:
    """SIGKILL has happened: run the check until it marks the run failed; how long that took."""
    killed = time.monotonic()
    def abandoned():
        check()
        return model.objects.get(pk=run_id).status == model.Status.FAILED

    wait_for(abandoned, 30, "the killed run marked abandoned")
    return time.monotonic() - killed


def test_a_sweep_sigkilled_from_outside_is_seen_dead_within_seconds_and_the_next_sweep_finishes(escalated):  # noqa: F811
    proc = start_manage("sweep", "--page-size", "3", UNSAY_SWEEP_PAGE_DELAY="3")
    wait_for(lambda: SweepRun.objects.filter(pages__gte=1).exists(), 90, "a committed page", proc)
    run = SweepRun.objects.get()
    assert abandon_dead_runs() == 0  # alive: it holds its run lock
    assert SweepRun.objects.get(pk=run.pk).status == SweepRun.Status.RUNNING

    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    took = seconds_until_abandoned(SweepRun, run.pk, reap_dead_runs)  # the periodic check (every minute)

    run.refresh_from_db()
    assert took < DETECTED_WITHIN and "process is gone" in run.error_text, (took, run.error_text)
    print(f"SIGKILLed sweep detected dead in {took:.2f}s")
    assert 0 < count_stale() < AFFECTED  # its committed pages stay; the rest is still in the stale set
    resumed = start_manage("sweep", "--page-size", "3")
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err[-2000:]
    assert_exactly_once_and_complete(escalated)


def test_sigterm_makes_manage_sweep_finish_its_page_and_hand_the_rest_back(escalated):  # noqa: F811
    proc = start_manage("sweep", "--page-size", "3", UNSAY_SWEEP_PAGE_DELAY="2")
    wait_for(lambda: SweepRun.objects.filter(pages__gte=1).exists(), 90, "a committed page", proc)

    asked = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    took = time.monotonic() - asked

    assert proc.returncode == 3, err[-2000:]
    assert "Handed back" in err and took < 30
    run = SweepRun.objects.get()
    assert run.status == SweepRun.Status.FAILED and run.error_text.startswith("handed back: stopped on request")
    assert run.examined == 3 * run.pages and run.pages < 4  # whole pages only, and it stopped early
    assert count_stale() == AFFECTED - run.examined
    resumed = start_manage("sweep", "--page-size", "3")
    _out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err[-2000:]
    assert_exactly_once_and_complete(escalated)


@pytest.fixture
def fresh_ingest(no_auto_sweep, hashing_embeddings):
    assert not IngestRun.objects.exists()


def assert_everything_written():
    """A further run of the same snapshot finds nothing new: the stopped run plus its resumption wrote it all."""
    again = ingest_file(str(DEMO_SLICE))
    assert (again.status, again.new_facts, again.new_versions, again.retracted) == ("succeeded", 0, 0, 0)


def test_an_ingest_sigkilled_from_outside_is_seen_dead_within_seconds_and_resumed(fresh_ingest):
    proc = start_manage("ingest_recalls", "--file", str(DEMO_SLICE), "--workers", "1", "--no-progress",
                        UNSAY_INGEST_CHUNK_DELAY="3")
    wait_for(lambda: IngestRun.objects.filter(fetched__gte=1).exists(), 120, "a written chunk", proc)
    killed = IngestRun.objects.get()
    from recalls.runs import abandon_dead_runs as abandon_dead_ingests

    assert abandon_dead_ingests() == 0  # alive: it holds its run lock

    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    took = seconds_until_abandoned(IngestRun, killed.pk, reap_dead_runs)

    killed.refresh_from_db()
    assert took < DETECTED_WITHIN and "process is gone" in killed.error, (took, killed.error)
    print(f"SIGKILLed ingest detected dead in {took:.2f}s")
    assert 0 < killed.fetched < killed.total
    result = resume_ingest(killed.pk)  # what the check queues for the worker
    resumed = IngestRun.objects.get(pk=result["resumed"])
    assert resumed.status == "succeeded" and resumed.trigger == "resume"
    assert resumed.source_ref.startswith(f"resumes run {killed.pk}")
    assert resumed.unchanged >= killed.fetched  # what the killed run wrote is kept, not written again
    assert resume_ingest(killed.pk)["resumed"] is None  # only once
    assert_everything_written()


def test_sigterm_makes_ingest_recalls_finish_its_chunk_and_hand_the_rest_back(fresh_ingest):
    proc = start_manage("ingest_recalls", "--file", str(DEMO_SLICE), "--workers", "1", "--no-progress",
                        UNSAY_INGEST_CHUNK_DELAY="2")
    wait_for(lambda: IngestRun.objects.filter(fetched__gte=1).exists(), 120, "a written chunk", proc)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)

    assert proc.returncode == 3, err[-2000:]
    stopped = IngestRun.objects.get()
    assert stopped.status == "failed" and stopped.error.startswith("handed back: stopped on request")
    assert 0 < stopped.fetched < stopped.total and stopped.fetched % 200 == 0  # whole chunks
    resumed = start_manage("ingest_recalls", "--file", str(DEMO_SLICE), "--workers", "1", "--no-progress")
    _out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-2000:]
    assert IngestRun.objects.order_by("-id").first().unchanged >= stopped.fetched
    assert_everything_written()


REDIS = os.environ.get("REDIS_URL")


@pytest.mark.skipif(not REDIS, reason="needs a real Redis (REDIS_URL)")
def test_sigterm_makes_a_celery_worker_finish_its_sweep_page_and_queue_the_rest(escalated):  # noqa: F811
    import redis

    from corrections.tasks import periodic_sweep

    queue = f"handback-{uuid.uuid4().hex[:8]}"
    env = subprocess_env(**NO_TRIGGERS, REDIS_URL=REDIS, UNSAY_CELERY_EAGER="0", UNSAY_SWEEP_PAGE_DELAY="2",
                         UNSAY_SWEEP_PAGE_SIZE="3")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "unsay_site", "worker", "--pool", "prefork", "--concurrency", "1",
         "-Q", queue, "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{queue}@%h",
         "--loglevel", "INFO"],
        cwd=PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    client = redis.Redis.from_url(REDIS)
    try:
        periodic_sweep.apply_async(queue=queue)
        wait_for(lambda: SweepRun.objects.filter(pages__gte=1).exists(), 120, "a committed page", worker)
        asked = time.monotonic()
        worker.send_signal(signal.SIGTERM)  # the main process only, as `kill`, Docker and the demo do
        _out, err = worker.communicate(timeout=60)
        took = time.monotonic() - asked
        assert worker.returncode == 0, err[-3000:]
        run = SweepRun.objects.get()
        assert run.status == SweepRun.Status.FAILED and run.error_text.startswith("handed back"), err[-3000:]
        assert run.examined == 3 * run.pages and run.pages < 4  # whole pages, and it stopped early
        assert count_stale() == AFFECTED - run.examined
        assert client.llen(queue) == 1  # the same task, queued again for the next worker
        assert took < 30
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
        client.delete(queue)
