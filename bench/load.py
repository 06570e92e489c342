"""Loopback load test: the app served by gunicorn, N clients probing /health and M clients
asking POST /api/v1/ask at once, for a bounded time; then checks the app still answers normally.

    .venv/bin/python bench/load.py                       # 200 /health + 50 /api/v1/ask clients for 60 s
    .venv/bin/python bench/load.py --seconds 20 --health-clients 50 --ask-clients 10

Everything stays on 127.0.0.1: gunicorn binds a free loopback port, every request has a 30 s timeout
(one that runs out counts as a hang), every client stops at the deadline or after --max-requests,
and gunicorn is stopped at the end. Uses its own database (unsay_bench_load) on the embedded engine
with the demo slice (real openFDA records) and the synthetic demo patients, hashing embeddings.
Prints min/median/max latency per endpoint, the peak of database connections, and a same-run
reference: one client's sequential /health and /api/v1/ask latency before the load.
"""

import argparse
import json
import os
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from _common import describe_machine, percentile, serve_gunicorn, setup_django

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--seconds", type=float, default=60.0)
parser.add_argument("--health-clients", type=int, default=200)
parser.add_argument("--ask-clients", type=int, default=50)
parser.add_argument("--max-requests", type=int, default=5000, help="per client, a bound besides the deadline")
parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
parser.add_argument("--threads", type=int, default=16, help="gunicorn threads per worker")
args = parser.parse_args()
assert args.seconds <= 600, "bounded: at most 10 minutes"

DB_NAME = "unsay_bench_load"
setup_django(db_name=DB_NAME, profile="test")

from django.db import connection  # noqa: E402

from ask.keys import issue_key  # noqa: E402
from ask.models import ApiClient, ClientPatient  # noqa: E402
from demo.patients import DEMO_PATIENT_REFS, seed_demo  # noqa: E402
from demo.slice import ingest_demo  # noqa: E402
from memory.models import Fact  # noqa: E402
from patients.models import Patient  # noqa: E402

if not Fact.objects.exists():
    ingest_demo()
seed_demo()
client, _ = ApiClient.objects.get_or_create(name="bench-load (synthetic)")
patients = list(Patient.objects.filter(external_ref__in=DEMO_PATIENT_REFS).order_by("external_ref"))
for patient in patients:
    ClientPatient.objects.get_or_create(patient=patient, defaults={"client": client})
patients = [p for p in patients if ClientPatient.objects.filter(patient=p, client=client).exists()]
_, secret = issue_key(client, name="bench-load")


def connections_now() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
        return cursor.fetchone()[0]


def max_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        return int(cursor.fetchone()[0])


env = dict(os.environ, UNSAY_PROFILE="test", UNSAY_DB_NAME=DB_NAME, UNSAY_HEALTH_CACHE_SECONDS="5",
           UNSAY_CELERY_EAGER="1", UNSAY_SWEEP_ON_SUPERSESSION="0",
           # one key for every client: its per-minute limit is raised, still counted on every request
           UNSAY_API_RATE_PER_MINUTE="1000000")
GUNICORN_ARGS = ["--workers", str(args.workers), "--threads", str(args.threads), "--timeout", "60", "--backlog", "2048"]



def request(path, body=None):
    """(status or None, seconds, error); a timeout is a hang."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"} if body is not None else {}
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(urllib.request.Request(BASE + path, data=data, headers=headers),
                                    timeout=30) as response:
            response.read()
            return response.status, time.perf_counter() - started, ""
    except urllib.error.HTTPError as exc:
        exc.read()
        return exc.code, time.perf_counter() - started, ""
    except TimeoutError:
        return None, time.perf_counter() - started, "timeout"
    except OSError as exc:
        return None, time.perf_counter() - started, type(exc).__name__


def ask_body(i):
    return {"patient": patients[i % len(patients)].external_ref, "question": "Is my medicine safe to take?"}


with serve_gunicorn(env, log_name="bench-load-gunicorn", args=GUNICORN_ARGS) as (port, log_path):
    BASE = f"http://127.0.0.1:{port}"
    print(f"machine: {describe_machine()}")
    print(f"gunicorn: {args.workers} workers x {args.threads} threads; PostgreSQL max_connections "
          f"{max_connections()}; {len(patients)} synthetic patients")

    reference = {"health": [request("/health")[1] for _ in range(20)],
                 "ask": [request("/api/v1/ask", ask_body(i))[1] for i in range(10)]}

    results = {"health": [], "ask": []}
    lock = threading.Lock()
    stop_at = time.monotonic() + args.seconds
    peak = [connections_now()]
    sampling = threading.Event()
    refused = []

    def sample():
        while not sampling.is_set():
            try:
                peak[0] = max(peak[0], connections_now())
            except Exception as exc:  # "too many clients" would show here
                refused.append(str(exc))
            time.sleep(0.25)

    def client_loop(kind, index):
        mine = []
        for n in range(args.max_requests):
            if time.monotonic() >= stop_at:
                break
            mine.append(request("/health") if kind == "health" else request("/api/v1/ask", ask_body(index + n)))
        with lock:
            results[kind].extend(mine)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.health_clients + args.ask_clients) as pool:
        jobs = [pool.submit(client_loop, "health", i) for i in range(args.health_clients)]
        jobs += [pool.submit(client_loop, "ask", i) for i in range(args.ask_clients)]
        for job in jobs:
            job.result()
    elapsed = time.monotonic() - began
    sampling.set()
    sampler.join()
    after_health = request("/health")
    after_ask = request("/api/v1/ask", ask_body(0))

    ms = 1000
    print(f"reference (one client, before the load): /health min/median/max "
          f"{min(reference['health']) * ms:.1f}/{statistics.median(reference['health']) * ms:.1f}/"
          f"{max(reference['health']) * ms:.1f} ms; /api/v1/ask {min(reference['ask']) * ms:.1f}/"
          f"{statistics.median(reference['ask']) * ms:.1f}/{max(reference['ask']) * ms:.1f} ms")
    for kind, clients in (("health", args.health_clients), ("ask", args.ask_clients)):
        rows = results[kind]
        seconds = [s for _, s, _ in rows]
        statuses = Counter(status for status, _, _ in rows)
        hangs = sum(1 for _, _, e in rows if e == "timeout")
        errors = Counter(e for _, _, e in rows if e and e != "timeout")
        print(f"{'/health' if kind == 'health' else '/api/v1/ask'}: {clients} clients, {len(rows)} requests in "
              f"{elapsed:.1f}s ({len(rows) / elapsed:.0f}/s); statuses {dict(statuses)}; hangs {hangs}; "
              f"errors {dict(errors)}; latency min/median/p99/max {min(seconds) * ms:.1f}/"
              f"{statistics.median(seconds) * ms:.1f}/{percentile(seconds, 99) * ms:.1f}/{max(seconds) * ms:.1f} ms")
    print(f"database: peak {peak[0]} client connections of {max_connections()}; refused while sampling: "
          f"{len(refused)}{' (' + refused[0][:120] + ')' if refused else ''}")
    print(f"after the load: /health {after_health[0]} in {after_health[1] * ms:.1f} ms, "
          f"/api/v1/ask {after_ask[0]} in {after_ask[1] * ms:.1f} ms")
    log_text = log_path.read_text()
    print(f"gunicorn log: {log_text.count('WORKER TIMEOUT')} worker timeouts, "
          f"{log_text.count('too many clients')} 'too many clients'")
