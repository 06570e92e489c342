"""Review queue, recall worklist and report pages with 10,000 drafts: p50/p95 latency and HTML size.

    .venv/bin/python bench/review_pages.py [--drafts 10000] [--requests 30] [--runs 3] [--reuse]

--runs N repeats the whole set of requests N times (after one build) and prints, per page, the
p95 of each run and min / median / max over the runs; the load average is printed before each run.
--reuse keeps the database of an earlier run with the same --drafts instead of rebuilding it.

Data (own database `unsay_bench_review`, rebuilt each run): three REAL openFDA recalls (claims
built by recalls.ingest, tests/factories.py), escalated to Class I / kept Class II; synthetic patients,
one dispensing row of the recalled lot each, one held draft + outbox message per patient (80% / 15% /
5% across the three recalls), plus 5% of drafts already approved and sent and a contact log entry for some, so every
page has every kind of row. Requests go through Django's test client against the real database,
logged in as a pharmacist; the same-run reference is the home page (framework + session + auth only).
"""

import argparse
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import describe_machine, percentile, setup_django  # noqa: E402

RECALLS = [("D-0315-2019", "3061169", "Class I", 0.80), ("D-0324-2019", "3063780", "Class II", 0.15),
           ("D-0326-2019", "3069020", "Class I", 0.05)]


def build(n_drafts: int):
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection

    from core.roles import PHARMACIST
    from corrections.models import CLASS_SEVERITY, Correction, OutboxMessage
    from drugs.lots import printed_lot
    from memory.embeddings import HashingEmbedding, reset_provider
    from memory.fact_writes import assert_claim
    from memory.models import Fact
    from patients.models import DispensingRecord, Patient
    from tests.factories import recall_claim
    from worklist.models import ContactAttempt

    reset_provider(HashingEmbedding(settings.UNSAY_EMBEDDING_DIM))
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE corrections_auditevent, worklist_workevent, worklist_contactattempt, "
                       "worklist_recalltask, worklist_recallwork, corrections_outboxmessage, corrections_correction, "
                       "patients_dispensingrecord, patients_patient CASCADE")
    user, _ = get_user_model().objects.get_or_create(username="bench-pharmacist")
    user.groups.add(Group.objects.get(name=PHARMACIST))
    now = datetime.now(UTC)
    made = 0
    for number, lot, classification, share in RECALLS:
        if not Fact.objects.filter(fact_key__startswith=f"recall:{number}:", retracted_at__isnull=True).exists():
            assert_claim(recall_claim(number, lot))
        fact = Fact.objects.filter(fact_key=f"recall:{number}:lot:{printed_lot(lot)}",
                                   retracted_at__isnull=True).get()
        if classification == "Class I" and fact.attributes.get("classification") != "Class I":
            assert_claim(recall_claim(number, lot, classification="Class I"), reason="bench: escalated")
            fact = Fact.objects.filter(fact_key=fact.fact_key, retracted_at__isnull=True).get()
        count = round(n_drafts * share)
        patients = Patient.objects.bulk_create([
            Patient(region="aws-us-east-1", display_name=f"Synthetic bench {number} {i:05d}",
                    external_ref=f"BENCH-{number}-{i:05d}", email=f"bench{i}@example.com",
                    phone="+15555550100", preferred_channel="sms" if i % 5 == 0 else "email", synthetic=True)
            for i in range(count)])
        DispensingRecord.objects.bulk_create([
            DispensingRecord(patient=p, region=p.region, drug=fact.subject, lot=fact.lot, synthetic=True,
                             dispensed_at=now - timedelta(days=30)) for p in patients])
        corrections = Correction.objects.bulk_create([
            Correction(kind="notice", status="sent" if i % 20 == 0 else "draft", patient=p, region=p.region,
                       match="lot", match_class="probable", recall_number=number, classification=classification,
                       severity=CLASS_SEVERITY[classification], new_verdict="stop", new_answer="bench",
                       trigger_fact=fact, drafted_text=f"Bench letter {i} for {p.display_name}. " * 4,
                       dedupe_key=uuid.uuid4().hex, reviewed_by=user if i % 20 == 0 else None,
                       reviewed_at=now if i % 20 == 0 else None)
            for i, p in enumerate(patients)])
        OutboxMessage.objects.bulk_create([
            OutboxMessage(correction=c, region=c.region, channel=c.patient.preferred_channel,
                          recipient=c.patient.phone if c.patient.preferred_channel == "sms" else c.patient.email,
                          subject="Update", body=c.drafted_text, dedupe_key=c.dedupe_key,
                          status="sent" if c.status == "sent" else "held", sent_at=now if c.status == "sent" else None)
            for c in corrections])
        ContactAttempt.objects.bulk_create([
            ContactAttempt(recall_number=number, patient=p, method="phone", outcome="not_reached", by=user, at=now)
            for p in patients[1::50]])
        made += count
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return user, made


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def measure(client, url, n):
    times, size = [], 0
    client.get(url)  # warm: template loading, first-query plans
    for _ in range(n):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        size = len(response.content)
    return times, size


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--drafts", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    setup_django(db_name="unsay_bench_review", profile="test", UNSAY_ALLOWED_HOSTS="testserver")
    from django.contrib.auth import get_user_model
    from django.test import Client

    from corrections.models import Correction

    started = time.perf_counter()
    if args.reuse and Correction.objects.count() == args.drafts:
        user, made = get_user_model().objects.get(username="bench-pharmacist"), args.drafts
    else:
        user, made = build(args.drafts)
    print(f"{describe_machine()}; {made} drafts ({Correction.objects.filter(status='draft').count()} "
          f"awaiting review) ready in {time.perf_counter() - started:.1f} s")
    client = Client()
    client.force_login(user)
    first = Correction.objects.filter(status="draft", recall_number=RECALLS[0][0]).order_by(
        "-severity", "created", "id").values_list("id", flat=True)[19]
    pages = [("reference: home page", "/"), ("review queue", "/corrections/review/"), ("worklist", "/worklist/"),
             ("review queue: htmx more", f"/corrections/review/more/{RECALLS[0][0]}?after={first}"),
             ("recall page (500 patients)", f"/worklist/recall/{RECALLS[2][0]}"),
             ("report (500 patients)", f"/worklist/report/{RECALLS[2][0]}"),
             ("recall page (8,000 patients)", f"/worklist/recall/{RECALLS[0][0]}"),
             ("recall page (8,000), page 80", f"/worklist/recall/{RECALLS[0][0]}?page=80"),
             ("report (8,000 patients)", f"/worklist/report/{RECALLS[0][0]}"),
             ("follow-up queue (200 waiting)", "/worklist/follow-up/")]
    p95s = {label: [] for label, _ in pages}
    for run in range(1, args.runs + 1):
        print(f"\nrun {run}/{args.runs}, load average {loadavg()}")
        print(f"{'page':32} {'min':>8} {'p50':>8} {'p95':>8} {'max':>8} {'HTML':>10} {'p95/ref':>8}")
        ref = None
        for label, url in pages:
            times, size = measure(client, url, args.requests)
            p95 = percentile(times, 95)
            ref = ref or p95
            p95s[label].append(p95)
            print(f"{label:32} {min(times):7.1f}ms {statistics.median(times):7.1f}ms {p95:7.1f}ms "
                  f"{max(times):7.1f}ms {size / 1024:8.1f}kB {p95 / ref:7.1f}x")
    print(f"\np95 over {args.runs} run(s) of {args.requests} requests, load average now {loadavg()}")
    print(f"{'page':32} {'min':>8} {'median':>8} {'max':>8}")
    for label, values in p95s.items():
        print(f"{label:32} {min(values):7.1f}ms {statistics.median(values):7.1f}ms {max(values):7.1f}ms")


if __name__ == "__main__":
    main()
