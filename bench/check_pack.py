"""Check my pack under load: the page served by gunicorn (2 workers, gunicorn.conf.py's threads) driven at a
fixed rate, open loop, with /health at the same rate in the same run as the reference.

    .venv/bin/python bench/check_pack.py                        # 200 requests/s, 30 s each
    .venv/bin/python bench/check_pack.py --rate 100 --seconds 10

Requests are sent on schedule (request i at start + i/rate) by a pool of client threads on keep-alive
connections; latency is measured from the scheduled time, so a server falling behind shows in it (no
coordinated omission). The /check requests are POSTs of the form, a mix built from the REAL recall records
of the demo slice (demo/slice.py) in its own database (unsay_bench_check): the recalled lot of a lot-level
recall (40%), another lot of it (20%), the same lot one character off (10%), no lot (10%), an NDC no recall
names (10%), a GS1 element string of a recalled pack (10%). Every request comes from 127.0.0.1, so the
per-address limit is raised for the run (UNSAY_CHECK_RATE_PER_MINUTE); it is still counted, in the database,
on every request, as in production. Prints the achieved rate, statuses and p50/p95/max per phase, and the
outcomes counted by the app during the run.
"""

import argparse
import http.client
import os
import random
import threading
import time
import urllib.parse
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from _common import describe_machine, percentile, serve_gunicorn, setup_django

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--rate", type=float, default=200.0, help="requests per second, each phase")
parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
parser.add_argument("--clients", type=int, default=64, help="client threads (connections)")
parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
args = parser.parse_args()
assert args.seconds <= 300, "bounded: at most 5 minutes a phase"

DB_NAME = "unsay_bench_check"
setup_django(db_name=DB_NAME, profile="test")

from django.db import connection  # noqa: E402

from ask.pack_check_counts import outcome_counts  # noqa: E402
from demo.slice import ingest_demo  # noqa: E402
from drugs import recall_terms  # noqa: E402
from drugs.gs1 import gtin_for_ndc  # noqa: E402
from memory.models import Fact  # noqa: E402

if not Fact.objects.filter(kind=Fact.Kind.RECALL).exists():
    ingest_demo()
    with connection.cursor() as cursor:  # as load_demo does (and autovacuum would, a minute later)
        cursor.execute("ANALYZE")


def printed(ndc11: str) -> str:
    """A 5-4-2 NDC as a pack prints it when one of its segments was padded (else as it is)."""
    labeler, product, package = ndc11.split("-")
    if labeler.startswith("0"):
        return f"{labeler[1:]}-{product}-{package}"
    if product.startswith("0"):
        return f"{labeler}-{product[1:]}-{package}"
    return f"{labeler}-{product}-{package[1:]}" if package.startswith("0") else ndc11


def forms() -> list[dict]:
    rng = random.Random(7)
    lot_level = []
    for fact in Fact.objects.believed().filter(kind=Fact.Kind.RECALL, lot__isnull=False).defer("embedding")[:2000]:
        ndcs = [n for n in (fact.attributes or {}).get("ndcs") or [] if n[:10] in recall_terms.named_products(fact)]
        if ndcs and fact.lot and len(fact.lot) >= 4:
            lot_level.append((ndcs[0], fact.lot))
    assert lot_level, "the demo slice has no lot-level recall with an NDC"
    mix = []
    for i in range(1000):
        ndc, lot = rng.choice(lot_level)
        pick = i % 10
        if pick < 4:
            mix.append({"ndc": printed(ndc), "lot": f"LOT {lot}"})
        elif pick < 6:
            mix.append({"ndc": ndc, "lot": f"{lot[:-1]}{(int(lot[-1]) + 1) % 10 if lot[-1].isdigit() else 'Z'}9"})
        elif pick == 6:
            mix.append({"ndc": ndc, "lot": "0" + lot})
        elif pick == 7:
            mix.append({"ndc": ndc})
        elif pick == 8:
            mix.append({"ndc": f"{rng.randrange(10000, 99999)}-{rng.randrange(1000, 9999)}-11", "lot": lot})
        else:
            try:
                mix.append({"gs1": f"01{gtin_for_ndc(printed(ndc))}17281130" + f"10{lot}"})
            except ValueError:
                mix.append({"ndc": ndc, "lot": lot})
    return mix


FORMS = [urllib.parse.urlencode(form).encode() for form in forms()]

# The demo server's settings (make demo): its profile, so its database connections are kept open.
env = dict(os.environ, UNSAY_PROFILE="demo", UNSAY_DB_NAME=DB_NAME, UNSAY_HEALTH_CACHE_SECONDS="5",
           UNSAY_CELERY_EAGER="1", UNSAY_CHECK_RATE_PER_MINUTE="1000000")
GUNICORN_ARGS = ["-c", "gunicorn.conf.py", "--workers", str(args.workers), "--backlog", "2048",
                 "--access-logfile", "/dev/null"]
local = threading.local()


def send(method: str, path: str, body: bytes | None = None) -> int | None:
    """One request on this thread's keep-alive connection; the status, or None on a failure."""
    for attempt in range(2):
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        try:
            headers = {"Content-Type": "application/x-www-form-urlencoded"} if body is not None else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            connection.close()
            local.connection = None
            if attempt:
                return None
    return None


def phase(name: str, make_request) -> dict:
    """Requests on schedule at args.rate for args.seconds; latency from each request's scheduled time."""
    total = int(args.rate * args.seconds)
    results = []
    lock = threading.Lock()
    start = time.perf_counter() + 0.2

    def one(i):
        due = start + i / args.rate
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        status = make_request(i)
        done = time.perf_counter()
        with lock:
            results.append((status, done - due, done))

    with ThreadPoolExecutor(max_workers=args.clients) as pool:
        list(pool.map(one, range(total)))
    finished = max(done for _, _, done in results)
    latencies = sorted(latency for _, latency, _ in results)
    return {"name": name, "n": len(results), "rate": len(results) / (finished - start),
            "statuses": dict(Counter(status for status, _, _ in results)),
            "p50": percentile(latencies, 50), "p95": percentile(latencies, 95), "max": latencies[-1]}


with serve_gunicorn(env, log_name="bench-check-gunicorn", args=GUNICORN_ARGS) as (PORT, log_path):
    for body in FORMS[:50]:  # warm both workers' code paths and caches
        send("POST", "/check", body)
    before = outcome_counts()
    print(f"machine: {describe_machine()}")
    print(f"gunicorn: {args.workers} workers (gunicorn.conf.py threads); {len(FORMS)} distinct forms from "
          f"{Fact.objects.believed().filter(kind=Fact.Kind.RECALL).count()} believed recall facts; "
          f"{args.rate:.0f} requests/s for {args.seconds:.0f} s per phase, {args.clients} client threads")
    ms = 1000
    for result in (phase("GET /health (reference)", lambda i: send("GET", "/health")),
                   phase("POST /check", lambda i: send("POST", "/check", FORMS[i % len(FORMS)]))):
        print(f"{result['name']}: {result['n']} requests, achieved {result['rate']:.1f}/s; statuses "
              f"{result['statuses']}; latency p50 {result['p50'] * ms:.1f} ms, p95 {result['p95'] * ms:.1f} ms, "
              f"max {result['max'] * ms:.1f} ms")
    after = outcome_counts()
    print("outcomes counted by the app during the run: "
          + ", ".join(f"{k} {after.get(k, 0) - before.get(k, 0)}" for k in sorted(after)))
    text = log_path.read_text()
    print(f"gunicorn log: {text.count('WORKER TIMEOUT')} worker timeouts, {text.count('Traceback')} tracebacks")
