"""Fact write throughput on the embedded engine: assert_claim per second at 1, 16, 64 and 128 concurrent
writers (threads, each with its own database connection, released together by a barrier), plus the
contention scenario (16 writers racing on each of 4 keys) and the cost of re-asserting unchanged claims.

    .venv/bin/python bench/memory_writes.py                       # defaults: a minute or two on 2 cores
    .venv/bin/python bench/memory_writes.py --writers 1,16 --claims 2000 --embeddings local

Runs on its own embedded data dir (var/pgdata-bench, max_connections raised to 300) so 128 writers can
each hold a connection; set DATABASE_URL to measure another server. Embeddings default to the hashing
provider so the figure is the database write path; --embeddings local adds real MiniLM cost per claim.
"""

import argparse
import logging
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, connection_headroom, describe_machine, percentile, setup_django  # noqa: E402


class ConflictCounter(logging.Handler):
    """Counts the retry helper's 'transaction conflict' log lines (one per retried attempt)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record):
        if "transaction conflict" in record.getMessage():
            self.count += 1


def race(writers, work):
    """Run work(i) on `writers` threads with their own connections; return (wall seconds, latencies, errors)."""
    from django.db import connections

    barrier = threading.Barrier(writers + 1)
    latencies, errors = [], []
    lock = threading.Lock()

    def run(i):
        try:
            connections["default"].ensure_connection()
            barrier.wait()
            for seconds in work(i):
                with lock:
                    latencies.append(seconds)
        except Exception as exc:  # counted and printed: a bench must show failures, not hide them
            with lock:
                errors.append(repr(exc))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    with Timer() as timer:
        for t in threads:
            t.join()
    return timer.seconds, latencies, errors


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", default="1,16,64,128", help="comma-separated writer counts")
    parser.add_argument("--claims", type=int, default=1280, help="claims written per scenario (split over writers)")
    parser.add_argument("--contention-rounds", type=int, default=3, help="repeats of the 64-writer race")
    parser.add_argument("--embeddings", choices=["hashing", "local"], default="hashing")
    args = parser.parse_args()

    setup_django(profile="test" if args.embeddings == "hashing" else "demo", own_server_connections=300,
                 UNSAY_EMBEDDINGS=args.embeddings)
    from memory.embeddings import get_provider
    from memory.models import Fact
    from memory.services import Claim, assert_claim

    get_provider().embed_one("warm up")  # load the model (local) before timing
    conflicts = ConflictCounter()
    logging.getLogger("unsay_site.retry").addHandler(conflicts)
    logging.getLogger("unsay_site.retry").setLevel(logging.INFO)
    run = uuid.uuid4().hex[:8]
    print(f"# memory_writes on {describe_machine()}; embeddings={get_provider().name}; run {run}")

    def claim(key, statement):
        return Claim(fact_key=key, kind="note", subject="bench", statement=statement, source="bench")

    print("\n| writers | claims | seconds | asserts/s | p50 ms | p95 ms | failed writers |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for writers in [int(w) for w in args.writers.split(",")]:
        if connection_headroom() < writers + 2:
            print(f"| {writers} | skipped: only {connection_headroom()} free connections | | | | | |")
            continue
        per_writer = max(1, args.claims // writers)

        def work(i, writers=writers, per_writer=per_writer):
            for n in range(per_writer):
                started = time.perf_counter()
                assert_claim(claim(f"bench:{run}:w{writers}:{i}:{n}", f"writer {i} claim {n} of run {run}"))
                yield time.perf_counter() - started

        seconds, latencies, errors = race(writers, work)
        total = writers * per_writer
        print(f"| {writers} | {total} | {seconds:.2f} | {len(latencies) / seconds:.0f} | "
              f"{percentile(latencies, 50) * 1000:.1f} | {percentile(latencies, 95) * 1000:.1f} | {len(errors)} |")
        for error in errors[:3]:
            print(f"  error: {error}")

    # Unchanged content: one SELECT, no write, no embedding call.
    keys = [f"bench:{run}:w1:0:{n}" for n in range(max(1, args.claims))]
    existing = set(Fact.objects.filter(fact_key__in=keys).values_list("fact_key", flat=True))
    calls_before = get_provider().calls
    with Timer() as timer:
        for key in sorted(existing):
            n = key.rsplit(":", 1)[1]
            assert assert_claim(claim(key, f"writer 0 claim {n} of run {run}")).status == "unchanged"
    if existing:
        print(f"\nRe-asserting {len(existing)} unchanged claims (1 writer): {len(existing) / timer.seconds:.0f}/s, "
              f"{get_provider().calls - calls_before} embedding calls")

    # Contention: 64 writers, 16 racing on each of 4 keys, each writing one new version.
    print("\n| contention round | seconds | versions per key | believed per key | failed writers | "
          "retried attempts | p50 ms | max ms |")
    print("|---:|---:|---|---|---:|---:|---:|---:|")
    for round_ in range(args.contention_rounds):
        conflicts.count = 0

        def contend(i, round_=round_):
            started = time.perf_counter()
            assert_claim(claim(f"bench:{run}:race{round_}:{i % 4}", f"racer {i} round {round_}"))
            yield time.perf_counter() - started

        seconds, latencies, errors = race(64, contend)
        chains = []
        for k in range(4):
            versions = list(Fact.objects.filter(fact_key=f"bench:{run}:race{round_}:{k}").order_by("version")
                            .values_list("version", "retracted_at"))
            dense = [v for v, _ in versions] == list(range(1, 17))
            believed = sum(1 for _, r in versions if r is None)
            chains.append((dense, believed))
        dense_all = "1..16 on all 4" if all(d for d, _ in chains) else f"NOT DENSE {chains}"
        believed_all = "1 on all 4" if all(b == 1 for _, b in chains) else f"WRONG {chains}"
        print(f"| {round_ + 1} | {seconds:.2f} | {dense_all} | {believed_all} | {len(errors)} | {conflicts.count} | "
              f"{percentile(latencies, 50) * 1000:.1f} | {max(latencies) * 1000:.1f} |")
        for error in errors[:3]:
            print(f"  error: {error}")


if __name__ == "__main__":
    main()
