"""CSV import of dispensing through the dispensing service (rows + audit, one announcement).

    .venv/bin/python bench/dispensing_import.py [--rows 5000] [--repeats 3]

Times patients.csvimport.import_dispensing_csv on one synthetic file (--rows rows over rows/3 synthetic
patients, some rows with a GS1 scan column), --repeats times, deleting what it imported in between,
and prints min/median/max seconds and rows/s for the import as shipped (patients.dispensing.
create_dispensings: bulk rows + bulk audit). Same-run references: the same validated records written
one by one with save_dispensing (row + audit per row, four round trips each), and with a bare
bulk_create and no audit (the import's write before it went through the dispensing service).
Runs in its own database (UNSAY_DB_NAME, default unsay_bench_import) on the embedded PostgreSQL.
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import setup_django  # noqa: E402

setup_django(db_name="unsay_bench_import")

from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from drugs.gs1 import gtin_for_ndc  # noqa: E402
from patients import csvimport  # noqa: E402
from patients.dispensing import save_dispensing  # noqa: E402
from patients.models import DispensingChange, DispensingRecord, Patient  # noqa: E402

# The dispensing audit and the audit chain's links of it: emptied together, so the row ids a repeat starts
# again from are never already linked.
CHAIN = "patients_dispensingchange, core_auditlink, core_auditchainhead"
DRUGS = [("valsartan", "0378-5814-77"), ("losartan", "68788-048-03"), ("metformin", ""), ("atorvastatin", "")]


def make_file(rows: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    patients = max(1, rows // 3)
    regions = settings.UNSAY_REGIONS
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {CHAIN}, patients_dispensingrecord, patients_patient RESTART IDENTITY CASCADE")
    Patient.objects.bulk_create([
        Patient(external_ref=f"IMP-{i:07d}", display_name=f"Import bench {i} (synthetic)",
                region=regions[i % len(regions)], email=f"imp{i}@example.com", synthetic=True)
        for i in range(patients)], batch_size=5000)
    lines = ["patient_ref,drug,ndc,lot,scan,quantity,dispensed_at,site"]
    for i in range(rows):
        drug, ndc = DRUGS[i % len(DRUGS)]
        lot = f"L{i:07d}"
        day = f"2019-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00"
        if ndc and i % 2:  # half of the NDC rows come scanned: GTIN, expiry, lot, serial; the NDC typed
            scan = f"01{gtin_for_ndc(ndc)}17301231|10{lot}|21S{i}"
            lines.append(f"IMP-{rng.randrange(patients):07d},{drug},{ndc},,{scan},30,{day},Bench (synthetic)")
        else:
            lines.append(f"IMP-{rng.randrange(patients):07d},{drug},{ndc},{lot},,30,{day},Bench (synthetic)")
    return "\n".join(lines) + "\n"


def clear_imported():
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {CHAIN}, patients_dispensingrecord RESTART IDENTITY CASCADE")


def time_service(text: str) -> float:
    began = time.perf_counter()
    result = csvimport.import_dispensing_csv(text, actor="bench")
    elapsed = time.perf_counter() - began
    assert result.ok, result.errors[:3]
    assert DispensingChange.objects.count() == result.imported
    return elapsed


def time_with_writer(text: str, writer) -> float:
    """The same validation, with the import's write replaced by `writer(records, actor=...)`."""
    original = csvimport.create_dispensings
    csvimport.create_dispensings = writer
    try:
        began = time.perf_counter()
        with transaction.atomic():
            result = csvimport.import_dispensing_csv(text, actor="bench")
        elapsed = time.perf_counter() - began
    finally:
        csvimport.create_dispensings = original
    assert result.ok
    return elapsed


def per_row_service(records, *, actor):
    for record in records:
        save_dispensing(record, actor=actor)


def bare_bulk_create(records, *, actor):
    for record in records:
        record.fingerprint = record.compute_fingerprint()
    DispensingRecord.objects.bulk_create(records, batch_size=1000)


def figures(name, timings, rows):
    return (f"{name:<34} min {min(timings):6.2f}s  median {statistics.median(timings):6.2f}s  "
            f"max {max(timings):6.2f}s  ({rows / statistics.median(timings):,.0f} rows/s)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    text = make_file(args.rows)
    print(f"{args.rows} rows, {len(text) / 1024:.0f} KiB, {Patient.objects.count()} patients; "
          f"{connection.vendor} {connection.cursor().connection.info.server_version}")
    shipped, per_row, bare = [], [], []
    for _ in range(args.repeats):
        clear_imported()
        shipped.append(time_service(text))
        clear_imported()
        per_row.append(time_with_writer(text, per_row_service))
        clear_imported()
        bare.append(time_with_writer(text, bare_bulk_create))
    clear_imported()
    print(figures("import (create_dispensings)", shipped, args.rows))
    print(figures("reference: save_dispensing per row", per_row, args.rows))
    print(figures("reference: bare bulk_create, no audit", bare, args.rows))


if __name__ == "__main__":
    main()
