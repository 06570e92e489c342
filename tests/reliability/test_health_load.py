"""/health under load: it answers up/down from a cached, bounded check, so a flood of probes touches the database a few
times in total. Real gunicorn, real database."""

import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import DatabaseError, connection

from core.health import CachedCheck
from tests.reliability.servers import gunicorn

pytestmark = pytest.mark.django_db(transaction=True)


def _database_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cursor.fetchone()[0]


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError as exc:
        return None, str(exc).encode()


def test_200_concurrent_health_probes_answer_and_never_exhaust_database_connections():
    _database_connections()  # this test's own connection, open before the baseline is read
    baseline, peak = [0], [0]
    counted, probing, stop = threading.Event(), threading.Event(), threading.Event()

    def sample():
        try:
            # The baseline is read by the sampler before gunicorn starts, so its own connection is in
            # the baseline, not in the excess; the peak is sampled once the probes begin.
            baseline[0] = peak[0] = _database_connections()
            counted.set()
            probing.wait()
            while not stop.is_set():
                peak[0] = max(peak[0], _database_connections())
                time.sleep(0.02)
        finally:
            connection.close()  # this thread's own connection

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert counted.wait(10)
    with gunicorn(workers=2, threads=100, UNSAY_HEALTH_CACHE_SECONDS="5") as base:
        probing.set()
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=200) as pool:
            answers = list(pool.map(lambda _: _get(base + "/health"), range(600)))  # 3 waves of 200
        elapsed = time.monotonic() - began
        stop.set()
        sampler.join()
        after = _get(base + "/health")
    statuses = [status for status, _ in answers]
    assert statuses.count(200) == 600, {s: statuses.count(s) for s in set(statuses)}
    assert {body for _, body in answers} == {b'{"status": "up"}'}
    assert elapsed < 60
    # Two gunicorn workers, each refreshing its cached check at most once per 5 s: at most one
    # connection each at any time (both at once now and then); without the cache, 200 concurrent
    # probes would hold up to 200.
    assert peak[0] - baseline[0] <= 2, f"peak {peak[0]} connections, baseline {baseline[0]}"
    assert after[0] == 200


def test_one_refresh_at_a_time_and_others_answer_the_cached_value_at_once():
    calls = []
    release = threading.Event()

    def slow_check():
        calls.append(1)
        release.wait(5)
        return {"status": "up", "ok": True, "n": len(calls)}

    check = CachedCheck(slow_check, lambda: 0.0, {"status": "down", "ok": False})  # always stale
    check.value, check.at = {"status": "up", "ok": True, "n": 0}, 0.0  # an earlier answer exists
    first = threading.Thread(target=check.get)
    first.start()
    time.sleep(0.1)  # the first caller is refreshing now
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=50) as pool:
        others = list(pool.map(lambda _: check.get(), range(50)))
    assert time.monotonic() - began < 1  # nobody waited for the slow refresh
    assert all(answer["n"] == 0 for answer in others) and len(calls) == 1
    release.set()
    first.join()
    assert check.get()["n"] in (1, 2)


def test_a_database_that_does_not_answer_is_down_within_the_timeout(monkeypatch):
    from core import health

    class Refusing:
        vendor = "postgresql"

        def cursor(self):
            raise DatabaseError("sorry, too many clients already")

    monkeypatch.setattr(health, "connection", Refusing())
    monkeypatch.setattr(health.transaction, "atomic", lambda: __import__("contextlib").nullcontext())
    assert health.check_liveness() == {"status": "down", "ok": False}
