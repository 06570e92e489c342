"""What API v1 adds to a call: the same read and check through the HTTP stack (Django test client:
auth, the per-key rate-limit upsert, the body guard, ninja validation of the response) against the
service function alone, in the same run. Data: the real recall D-0326-2019 (one record, 19 lot facts)
and one synthetic patient, in the bench database.

    .venv/bin/python bench/api_overhead.py [--n 200]
"""

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import describe_machine, setup_django  # noqa: E402

setup_django(db_name="unsay_bench_api", UNSAY_SWEEP_ON_SUPERSESSION="0", UNSAY_API_RATE_PER_MINUTE="1000000")


def timed(fn, n):
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return samples[0], samples[len(samples) // 2], samples[-1]


def main():
    import zipfile

    from django.core.management import call_command
    from django.test import Client

    from api import services
    from ask.keys import issue_key
    from ask.models import ApiClient, ApiKey, ClientPatient
    from memory.models import Fact
    from patients.dispensing import save_dispensing
    from patients.models import DispensingRecord, Patient

    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    n = parser.parse_args().n
    if not Fact.objects.filter(fact_key__startswith="recall:D-0326-2019:").exists():
        fixtures = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "openfda"
        with zipfile.ZipFile(fixtures / "drug-enforcement-2021-04-28.json.zip") as archive:
            data = json.loads(archive.read(archive.namelist()[0]))
        path = Path("/tmp/bench-api-d0326.json")
        path.write_text(json.dumps({"results": [r for r in data["results"] if r["recall_number"] == "D-0326-2019"]}))
        call_command("ingest_recalls", "--file", str(path), "--no-progress", verbosity=0)
    client_row, _ = ApiClient.objects.get_or_create(name="Bench pharmacy (synthetic)")
    patient, created = Patient.objects.get_or_create(external_ref="SYN-BENCH-API", defaults=dict(
        region="aws-us-east-1", display_name="Synthetic bench patient", synthetic=True))
    ClientPatient.objects.get_or_create(client=client_row, patient=patient)
    if created:
        save_dispensing(DispensingRecord(patient=patient, drug="valsartan", lot="3069020", quantity=30, synthetic=True,
                                         dispensed_at=datetime(2019, 1, 5, 12, tzinfo=UTC)), actor="bench")
    key, secret = issue_key(client_row, kind=ApiKey.Kind.PATIENT, patient=patient, name="bench")
    decision = services.ask(key, "Is my valsartan safe?")
    http = Client()
    headers = {"Authorization": f"Bearer {secret}"}
    body = json.dumps({"decision_id": str(decision.public_id)})

    rows = [
        ("service decision_detail", lambda: services.decision_detail(services.visible_decision(key,
                                                                                              decision.public_id))),
        ("GET /api/v1/decisions/{id}", lambda: http.get(f"/api/v1/decisions/{decision.public_id}", headers=headers)),
        ("service check", lambda: services.check(key, [decision.public_id])),
        ("POST /api/v1/check", lambda: http.post("/api/v1/check", body, content_type="application/json",
                                                 headers=headers)),
        ("reference: SELECT 1 round trip", lambda: _select_one()),
    ]
    print(describe_machine())
    print(f"n={n} per row; decision with {decision.reads.count()} reads")
    for name, fn in rows:
        fn()  # warm
        low, median, high = timed(fn, n)
        print(f"{name:34s} min {low:7.2f} ms  median {median:7.2f} ms  max {high:7.2f} ms")


def _select_one():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


if __name__ == "__main__":
    main()
