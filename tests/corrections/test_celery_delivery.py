"""Celery delivery against a real Redis and real worker processes: a task whose worker is
killed mid-sweep is not lost. With late acks and reject_on_worker_lost a task whose worker dies is
delivered again; with the whole worker SIGKILLed, Redis hands the unacknowledged message to the next
worker once the visibility timeout has passed."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import redis

from tests.procs import PROJECT_DIR

REDIS = os.environ.get("UNSAY_TEST_CELERY_REDIS") or os.environ.get("REDIS_URL")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not REDIS, reason="needs a real Redis (REDIS_URL)")]


def _worker(queue, **env_extra):
    env = dict(os.environ, UNSAY_PROFILE="test", REDIS_URL=REDIS, UNSAY_CELERY_EAGER="0",
               DJANGO_SETTINGS_MODULE="unsay_site.settings", PYTHONPATH=str(PROJECT_DIR), **env_extra)
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tests.celery_probe:app", "worker", "--pool", "prefork",
         "--concurrency", "1", "-Q", queue, "--without-gossip", "--without-mingle", "--without-heartbeat",
         "-n", f"{queue}@%h", "--loglevel", "WARNING"],
        cwd=PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def _lines(journal, timeout, predicate):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = journal.read_text().splitlines() if journal.exists() else []
        if predicate(lines):
            return lines
        time.sleep(0.2)
    raise AssertionError(f"journal after {timeout}s: {journal.read_text() if journal.exists() else '(none)'}")


def _send(queue, journal, seconds):
    from tests.celery_probe import app

    with app.connection_for_write(REDIS) as conn:
        app.send_task("tests.probe_sleep", args=[str(journal), seconds], queue=queue, connection=conn)


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@pytest.fixture
def queue():
    name = f"house-probe-{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(REDIS)
    client.delete(name)


def test_a_task_whose_worker_process_is_killed_is_delivered_again_and_completes(tmp_path, queue):
    journal = tmp_path / "journal"
    worker = _worker(queue)
    try:
        _send(queue, journal, 3)
        first = _lines(journal, 60, lambda lines: any(line.startswith("start") for line in lines))
        child = int(first[0].split()[1])
        os.kill(child, signal.SIGKILL)  # the pool process running the task dies mid-task
        lines = _lines(journal, 60, lambda lines: any(line.startswith("done") for line in lines))
    finally:
        _stop(worker)
    starts = [line for line in lines if line.startswith("start")]
    assert len(starts) == 2 and starts[0] != starts[1], lines  # redelivered to a new pool process
    assert sum(line.startswith("done") for line in lines) == 1


def test_a_task_of_a_sigkilled_worker_goes_to_the_next_worker_after_the_visibility_timeout(tmp_path, queue):
    journal = tmp_path / "journal"
    short = {"UNSAY_CELERY_VISIBILITY_TIMEOUT": "6", "UNSAY_TASK_SOFT_TIME_LIMIT": "4", "UNSAY_TASK_TIME_LIMIT": "5",
             "UNSAY_CELERY_RESTORE_SECONDS": "1"}
    worker = _worker(queue, **short)
    try:
        _send(queue, journal, 2)
        _lines(journal, 60, lambda lines: any(line.startswith("start") for line in lines))
        _stop(worker)  # SIGKILL to the whole worker: nothing acknowledged, nothing requeued by it
        killed_at = time.monotonic()
        worker = _worker(queue, **short)
        lines = _lines(journal, 90, lambda lines: any(line.startswith("done") for line in lines))
        waited = time.monotonic() - killed_at
        assert waited < 60
    finally:
        _stop(worker)
    assert sum(line.startswith("start") for line in lines) == 2, lines
    assert sum(line.startswith("done") for line in lines) == 1
    assert waited >= 5, f"redelivered after {waited:.1f}s, before the visibility timeout"
