"""Exposure lookup at scale: time to resolve one recall lot to patients over N dispensing rows.

    .venv/bin/python bench/exposure.py [--rows 1000000] [--lookups 200] [--reuse]

Runs on the embedded PostgreSQL in its own database (UNSAY_DB_NAME, default unsay_bench_exposure),
migrates it, bulk-loads synthetic patients and dispensing with COPY, ANALYZEs, then times
patients.services.exposed_patients() for a lot-level fact (and, fewer times, a drug-level one) and
prints p50/p95, the median time of the admin dispensing pages (changelist, searches), and the
EXPLAIN ANALYZE plan of the lot query. --reuse keeps an existing load of the
same size instead of reloading.

Data shape: one patient per 4 rows; 200 drugs, each with N/2000 lots (so ~10 rows per (drug, lot));
the target lot is given to exactly 12 patients, like the demo.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))
os.environ.setdefault("UNSAY_DB_NAME", "unsay_bench_exposure")
os.environ.setdefault("UNSAY_PROFILE", "test")  # no secrets or models needed; hashing embeddings if any
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from drugs.lots import near_lot_key  # noqa: E402
from memory.models import Fact  # noqa: E402
from patients.models import DispensingRecord  # noqa: E402
from patients.services import exposed_patients, exposure_rows  # noqa: E402

TARGET_DRUG = "valsartan"
TARGET_LOT = "3069020"
TARGET_NDC = "00378-5814-77"
TARGET_PATIENTS = 12
DRUGS = 200


def bench_drug(i: int) -> str:
    return "benchdrug" + chr(97 + i // 26) + chr(97 + i % 26)


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def load(rows: int, seed: int = 1) -> dict:
    rng = random.Random(seed)
    regions = settings.UNSAY_REGIONS
    patients = max(TARGET_PATIENTS, rows // 4)
    lots_per_drug = max(1, rows // 2000)
    # Stored as identity keys directly (COPY bypasses DispensingRecord.save, as a bulk load would).
    drugs = [TARGET_DRUG] + [bench_drug(i) for i in range(1, DRUGS)]
    now = datetime.now(UTC)
    began = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE patients_dispensingrecord, patients_patient RESTART IDENTITY CASCADE")
    raw = connection.connection  # psycopg 3
    with raw.cursor() as cur:
        with cur.copy("COPY patients_patient (id, public_id, region, display_name, email, phone, preferred_channel, "
                      "external_ref, synthetic, created, updated) FROM STDIN") as copy:
            for pid in range(1, patients + 1):
                copy.write_row((pid, uuid.UUID(int=rng.getrandbits(128), version=4), regions[pid % len(regions)],
                                f"Bench patient {pid} (synthetic)", f"bench{pid}@example.com", "", "email",
                                f"BENCH-{pid:08d}", True, now, now))
        patients_done = time.monotonic()
        with cur.copy("COPY patients_dispensingrecord (patient_id, region, drug, drug_text, drug_source, "
                      "product_description, ndc, ndc_product, lot, lot_near, lot_unknown, expiry, quantity, "
                      "dispensed_at, site, synthetic, fingerprint, created, updated) FROM STDIN") as copy:
            for i in range(rows):
                ndc = ""
                if i < TARGET_PATIENTS:
                    pid, drug, lot = i + 1, TARGET_DRUG, TARGET_LOT
                    ndc = TARGET_NDC if i % 2 else ""  # half confirmed by NDC product, half probable
                else:
                    pid = rng.randint(1, patients)
                    drug_index = rng.randrange(DRUGS)
                    drug = drugs[drug_index]
                    lot = f"L{rng.randrange(lots_per_drug):06d}"
                    if rng.random() < 0.5:  # half the fills carry an NDC: 10 products per drug
                        ndc = f"{70000 + drug_index:05d}-{rng.randrange(10):04d}-01"
                    if rng.random() < 0.05:  # and some were filled before lots were recorded
                        lot = ""
                # The near-lot key as fill_derived() stores it: exposure reads a recall lot's rows by it.
                copy.write_row((pid, regions[pid % len(regions)], drug, drug, "drug-ner", "", ndc, ndc[:10], lot,
                                near_lot_key(lot) if lot else "", not lot, None, 30,
                                now - timedelta(minutes=rng.randrange(525_600)), "Bench site (synthetic)", True, "",
                                now, now))
    with connection.cursor() as cursor:
        for table in ("patients_patient", "patients_dispensingrecord"):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        loaded = time.monotonic()
        cursor.execute("ANALYZE patients_patient")
        cursor.execute("ANALYZE patients_dispensingrecord")
        cursor.execute("SELECT pg_total_relation_size('patients_dispensingrecord')")
        size = cursor.fetchone()[0]
    return {"patients": patients, "rows": rows, "lots_per_drug": lots_per_drug,
            "copy_patients_s": round(patients_done - began, 1), "copy_dispensing_s": round(loaded - patients_done, 1),
            "analyze_s": round(time.monotonic() - loaded, 1), "dispensing_table_mb": round(size / 2**20)}


def time_lookups(fact, repeats: int, **options) -> dict:
    for _ in range(min(5, repeats)):
        exposed_patients(fact, **options)  # warm the cache and the connection
    timings, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = exposed_patients(fact, **options)
        timings.append((time.perf_counter() - began) * 1000)
    return {"lookups": repeats, "p50_ms": round(percentile(timings, 0.50), 2),
            "p95_ms": round(percentile(timings, 0.95), 2), "max_ms": round(max(timings), 2),
            "patients": len(result), "rows": sum(len(e.dispensings) for e in result)}


def time_reference(repeats: int) -> dict:
    """Same-run reference: the first query shape, the (drug, lot) rows with their patients, no matching."""
    def run():
        return list(DispensingRecord.objects.filter(drug=TARGET_DRUG, lot=TARGET_LOT).select_related("patient")
                    .order_by("patient_id", "dispensed_at", "id"))
    for _ in range(min(5, repeats)):
        run()
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        timings.append((time.perf_counter() - began) * 1000)
    return {"lookups": repeats, "p50_ms": round(percentile(timings, 0.50), 2),
            "p95_ms": round(percentile(timings, 0.95), 2), "max_ms": round(max(timings), 2)}


def time_admin_pages(repeats: int = 3) -> dict:
    """Server-side time of the dispensing changelist pages staff use (test client, superuser)."""
    from django.test import Client
    from django.test.utils import setup_test_environment

    from unsay_site.models import User

    setup_test_environment()
    user, _ = User.objects.get_or_create(username="bench-exposure-admin",
                                         defaults={"is_staff": True, "is_superuser": True})
    client = Client(HTTP_HOST="localhost")  # allowed in the test and demo profiles
    client.force_login(user)
    pages = {"changelist": {}, "search lot as printed": {"q": f"Lot # {TARGET_LOT}"},
             "search patient ref": {"q": "BENCH-00000001"}, "search drug": {"q": TARGET_DRUG},
             "filter region": {"region__exact": settings.UNSAY_REGIONS[0]}}
    figures = {}
    try:
        for name, params in pages.items():
            timings = []
            for _ in range(repeats + 1):  # the first one warms up
                began = time.perf_counter()
                response = client.get("/admin/patients/dispensingrecord/", params)
                timings.append((time.perf_counter() - began) * 1000)
                assert response.status_code == 200, response.status_code
            figures[name] = round(statistics.median(timings[1:]), 1)
    finally:
        user.delete()
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="dispensing rows (default 1,000,000)")
    parser.add_argument("--lookups", type=int, default=200, help="timed lot lookups (default 200)")
    parser.add_argument("--reuse", action="store_true", help="keep an existing load of the same size")
    args = parser.parse_args()
    if args.rows < TARGET_PATIENTS:
        parser.error(f"--rows must be at least {TARGET_PATIENTS}")
    call_command("migrate", verbosity=0)
    existing = DispensingRecord.objects.count()
    if args.reuse and existing == args.rows:
        load_figures = {"rows": existing, "reused": True}
    else:
        load_figures = load(args.rows)
    lot_fact = Fact(kind="recall", subject=TARGET_DRUG, lot=TARGET_LOT, fact_key=f"recall:BENCH:lot:{TARGET_LOT}",
                    attributes={"recall_number": "BENCH", "scope": "lot", "ndcs": [TARGET_NDC],
                                "ndc_products": [TARGET_NDC[:10]]})
    drug_fact = Fact(kind="recall", subject=bench_drug(7), lot=None, fact_key="recall:BENCH:drug",
                     attributes={"recall_number": "BENCH", "scope": "drug", "ndc_products": ["70007-0003"]})
    reference = time_reference(args.lookups)
    lot_figures = time_lookups(lot_fact, args.lookups, candidates=False)
    with_candidates = time_lookups(lot_fact, max(5, args.lookups // 4))
    drug_figures = time_lookups(drug_fact, max(5, args.lookups // 20))
    rows = exposure_rows(lot_fact, candidates=False)
    plan = rows.explain(analyze=True, buffers=True)
    print(f"database: {connection.settings_dict['NAME']} (PostgreSQL {connection.pg_version // 10000}, embedded)")
    print("load:", json.dumps(load_figures))
    print("reference, same run (plain (drug, lot) query + patients, no matching):", json.dumps(reference))
    print("lot lookup (exposed_patients, lot-level fact, lot -> patients):", json.dumps(lot_figures))
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    print("load average while timing:", os.getloadavg())
    print("lot lookup with the drug's unknown-lot candidates (5% of rows have no lot):", json.dumps(with_candidates))
    print("drug lookup (exposed_patients, drug-level fact):", json.dumps(drug_figures))
    print("admin dispensing pages, median ms:", json.dumps(time_admin_pages()))
    print("EXPLAIN (ANALYZE, BUFFERS) of the lot query:")
    print(plan)
    # A recall lot's rows are read by their near-lot key (exact lots and near misses in one index read).
    lot_indexes = ("dispensing_lot_near", "dispensing_drug_lot", "dispensing_product_lot")
    if not any(index in plan for index in lot_indexes):
        print(f"WARNING: the plan uses none of the lot indexes ({', '.join(lot_indexes)})", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
