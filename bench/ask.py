"""Ask latency (rules reasoner) on the demo data, and the model-call cap counter under concurrent threads.

    .venv/bin/python bench/ask.py                 # 17 demo patients x 10 rounds, 4 threads x 250 reservations
    .venv/bin/python bench/ask.py --rounds 50 --threads 8 --reservations 1000

Loads the demo slice (real openFDA records) and the synthetic demo patients into its own database
(unsay_bench_ask) once, with hashing embeddings. Prints figures; asserts the cap is exact.
"""

import argparse
import threading

from _common import Timer, describe_machine, mean, percentile, setup_django

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--rounds", type=int, default=10, help="asks per demo patient")
parser.add_argument("--threads", type=int, default=4, help="concurrent threads reserving model calls")
parser.add_argument("--reservations", type=int, default=250, help="reservation attempts per thread")
args = parser.parse_args()

setup_django(db_name="unsay_bench_ask", profile="test")

from django.db import connection  # noqa: E402
from django.test import override_settings  # noqa: E402

from ask.models import UsageCounter  # noqa: E402
from ask.services import ask, decide, reserve_model_call  # noqa: E402
from demo.patients import DEMO_PATIENT_REFS, seed_demo  # noqa: E402
from demo.slice import ingest_demo  # noqa: E402
from memory.models import Fact  # noqa: E402
from patients.models import Patient  # noqa: E402

if not Fact.objects.exists():
    ingest_demo()
seed_demo()
patients = list(Patient.objects.filter(external_ref__in=DEMO_PATIENT_REFS))
print(f"machine: {describe_machine()}")
print(f"data: {Fact.objects.believed().count()} believed facts, {len(patients)} demo patients")

decide_times, ask_times, reads = [], [], []
for _ in range(args.rounds):
    for patient in patients:
        with Timer() as t:
            decide(patient, "Is my medicine safe to take?")
        decide_times.append(t.seconds)
        with Timer() as t:
            decision = ask(patient, "Is my medicine safe to take?")
        ask_times.append(t.seconds)
        reads.append(decision.reads.count())
ms = 1000
print(f"decide (reads only): n={len(decide_times)} p50={percentile(decide_times, 50) * ms:.1f} ms "
      f"p95={percentile(decide_times, 95) * ms:.1f} ms mean={mean(decide_times) * ms:.1f} ms")
print(f"ask (decide + record in one transaction): n={len(ask_times)} p50={percentile(ask_times, 50) * ms:.1f} ms "
      f"p95={percentile(ask_times, 95) * ms:.1f} ms mean={mean(ask_times) * ms:.1f} ms")
print(f"read set size: min={min(reads)} mean={mean(reads):.1f} max={max(reads)}")

UsageCounter.objects.all().delete()
cap = args.threads * args.reservations // 2
granted = [0] * args.threads


def consume(index):
    granted[index] = sum(reserve_model_call(None)[0] for _ in range(args.reservations))
    connection.close()


threads = [threading.Thread(target=consume, args=(i,)) for i in range(args.threads)]
# Settings are process-wide: override once, around all the threads.
with override_settings(UNSAY_MODEL_DAILY_CAP=cap, UNSAY_MODEL_HOURLY_CAP_PER_CLIENT=10**9), Timer() as t:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
attempts = args.threads * args.reservations
print(f"cap counter: {args.threads} threads x {args.reservations} attempts, cap {cap}: granted {sum(granted)} "
      f"({'exact' if sum(granted) == cap else 'WRONG'}), {attempts / t.seconds:.0f} attempts/s")
assert sum(granted) == cap
