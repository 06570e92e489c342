"""Ctrl-C on `make demo` stops its children gracefully: the worker gets SIGTERM (Celery's warm shutdown),
a sweep in flight finishes its page and hands the rest back, and only a child that outlives its bound
(the worker: a minute, said on the console) is SIGKILLed. Real processes throughout."""

import signal
import subprocess
import sys
import time

import pytest

from corrections.models import SweepRun
from demo import setup as demo_setup
from tests.corrections.test_sweep_crash import escalated  # noqa: F401
from tests.procs import PROJECT_DIR, subprocess_env
from tests.reliability.servers import free_port

pytestmark = pytest.mark.slow

SLOW_TO_STOP = """
import signal, sys, time
def stop(*_):
    time.sleep(float(sys.argv[1]))
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(600)
"""
DEAF = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(600)
"""


def child(code, *args):
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_the_worker_gets_longer_than_the_old_15_seconds_and_a_deaf_child_is_killed_at_its_bound():
    worker, deaf = child(SLOW_TO_STOP, 17), child(DEAF)
    said = []
    began = time.monotonic()
    codes = demo_setup.stop_children({"worker": worker, "beat": deaf}, timeouts={"beat": 2}, say=said.append)
    took = time.monotonic() - began

    assert codes == {"worker": 0, "beat": -signal.SIGKILL}  # the worker stopped by itself, after 17 s
    assert 17 <= took < 30
    assert said[0].startswith("Waiting up to 60s for worker (a sweep or ingest finishes its page in flight"), said
    assert "2s for beat" in said[0]
    assert "beat did not stop within 2s: killing it (SIGKILL)." in said
    assert not any("worker did not stop" in line for line in said)


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_on_the_demo_lets_the_worker_finish_its_sweep_page(escalated, tmp_path, no_auto_sweep):  # noqa: F811
    """The reproduction: Ctrl-C while the worker is mid periodic sweep (a page that takes 20 s here).
    Before: SIGKILL after 15 s, the run left 'running'. Now: the page is committed, the run handed back
    and the worker exits by itself."""
    redis_url, redis_proc = demo_setup.start_embedded_redis(tmp_path)  # a private broker
    port = free_port()
    log = tmp_path / "demo.out"
    env = subprocess_env(REDIS_URL=redis_url, UNSAY_SWEEP_PAGE_DELAY="20", UNSAY_SWEEP_PAGE_SIZE="3",
                         UNSAY_SWEEP_ON_SUPERSESSION="0", PYTHONUNBUFFERED="1")
    with log.open("w") as out:
        demo = subprocess.Popen([sys.executable, "manage.py", "demo", "--skip-load", "--port", str(port)],
                                cwd=PROJECT_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while "Unsay demo is up" not in log.read_text():
            assert demo.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        from unsay_site.celery import app

        with app.connection_for_write(redis_url) as conn:
            app.send_task("corrections.tasks.periodic_sweep", connection=conn)
        while not SweepRun.objects.filter(pages__gte=1).exists():
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)

        asked = time.monotonic()
        demo.send_signal(signal.SIGINT)  # Ctrl-C
        demo.wait(120)
        took = time.monotonic() - asked
        text = log.read_text()
        assert "Waiting up to" in text, text[-3000:]
        assert "Stopped: web exit 0, worker exit 0, beat exit 0." in text, text[-3000:]
        assert "Starting gunicorn" in text  # the web server is production's, stopped gracefully too
        assert "killing it (SIGKILL)" not in text, text[-3000:]
        assert took > 5  # it waited for the page in flight
        for run in SweepRun.objects.all():
            assert run.status != SweepRun.Status.RUNNING
        handed_back = SweepRun.objects.filter(error_text__startswith="handed back")
        assert handed_back.exists(), [(r.status, r.error_text) for r in SweepRun.objects.all()]
        print(f"Ctrl-C mid sweep page: the demo stopped in {took:.1f}s, worker exit 0, run handed back")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(30)
        demo_setup.stop_children({"redis": redis_proc})
