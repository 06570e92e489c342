"""Writing audited events, each sealed into the one audit chain after its transaction commits (core.audit_chain).

    .venv/bin/python bench/audit_chain.py [--runs 3]

Own database (UNSAY_DB_NAME, default unsay_bench_audit), emptied of audit events before each run. Three
shapes of writer, all through corrections.audit.record (the same call on older commits, so the script
measures them too):
1. serial: 1,000 events, one per transaction (a review, a dispatch), each sealed at its commit;
2. pages: 20 transactions of 200 events (a sweep page), each transaction's events sealed in one batch;
3. concurrent: 4 threads of 250 one-event transactions at once, all taking the one chain head lock.
Prints one JSON line per run and the medians.
"""

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import describe_machine, setup_django  # noqa: E402

setup_django(db_name="unsay_bench_audit")

from django.db import connection, connections, transaction  # noqa: E402

from corrections import audit  # noqa: E402

CHAIN_TABLES = ("corrections_auditevent", "corrections_auditchainhead", "core_auditlink", "core_auditchainhead",
                "worklist_workevent", "shelf_shelfevent", "patients_dispensingchange")


def empty_chain():
    existing = set(connection.introspection.table_names())
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(t for t in CHAIN_TABLES if t in existing)}")


def one(i):
    audit.record("approved", by="bench", before={"status": "draft", "i": i}, after={"status": "approved"},
                 note="bench")


def serial():
    for i in range(1000):
        one(i)


def pages():
    for _ in range(20):
        with transaction.atomic():
            for i in range(200):
                one(i)


def concurrent():
    def work():
        try:
            for i in range(250):
                one(i)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run() -> dict:
    result = {}
    for name, shape in (("serial_1000_s", serial), ("pages_20x200_s", pages), ("concurrent_4x250_s", concurrent)):
        empty_chain()
        start = time.perf_counter()
        shape()
        result[name] = round(time.perf_counter() - start, 3)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps({"machine": describe_machine()}))
    runs = []
    for _ in range(args.runs):
        runs.append(run())
        print(json.dumps(runs[-1]))
    print(json.dumps({"median": {k: statistics.median(r[k] for r in runs) for k in runs[0]}}))


if __name__ == "__main__":
    main()
