"""The sweep's pending-draft probe (corrections.sweep.stale_page.pending_corrections) is planned as index
probes even when the corrections table's statistics are older than its drafts: a new install's
first large recall analyses an empty table, then writes thousands of drafts in minutes. The plain
`new_decision_id = ANY(ids) ... LIMIT 1` form was planned as a sequential scan there (the planner
expects the first row to match; with no drafts on the page, it reads the whole table). Synthetic
patient; the drafts are copies of one synthetic notice."""

import pytest
from django.db import connection
from django.utils import timezone

from corrections.models import Correction
from corrections.sweep.stale_page import PENDING_PROBE_SQL, pending_corrections
from memory.models import Decision
from tests.factories import make_patient

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = Correction._meta.db_table


def _notice(patient, status="draft"):
    return Correction.objects.create(kind="notice", status=status, patient=patient, region=patient.region,
                                     match="lot", recall_number="D-0315-2019", classification="Class II",
                                     severity=2, new_verdict="caution", new_answer="synthetic",
                                     drafted_text="Synthetic letter.", dedupe_key=f"probe-{status}")


def _copy(template: Correction, count: int):
    """`count` copies of one row in one INSERT ... SELECT (unique columns made unique)."""
    columns, values = [], []
    constrained = {name for constraint in Correction._meta.constraints for name in getattr(constraint, "fields", ())}
    for field in Correction._meta.concrete_fields:
        if field.primary_key:
            continue
        columns.append(field.column)
        if field.column == "public_id":
            values.append("gen_random_uuid()")
        elif field.unique or field.name in constrained:
            values.append(f"{field.column} || '-' || g")
        elif field.column == "new_decision_id":
            values.append("1000000 + g")  # the drafts' own new decisions, none of them on the page
        else:
            values.append(field.column)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {TABLE} ({', '.join(columns)}) SELECT {', '.join(values)} "
                       f"FROM {TABLE}, generate_series(1, %s) AS g WHERE id = %s", [count, template.id])


def test_the_probe_reads_the_index_when_the_statistics_still_say_empty():
    patient = make_patient("SYN-PROBE-1")
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {TABLE}")  # statistics of the empty table, as on a new install
    _copy(_notice(patient), 10_000)  # drafts, as a sweep writes them
    page = list(range(1, 201))  # decision ids no draft names
    statuses = [Correction.Status.DRAFT.value, Correction.Status.APPROVED.value]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + PENDING_PROBE_SQL, [page, statuses])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f" on {TABLE} " in plan and f"Seq Scan on {TABLE} " not in plan, plan
    assert pending_corrections(page, lock=False) == {}


def test_the_probe_finds_a_pending_draft_among_the_page():
    patient = make_patient("SYN-PROBE-2")
    decision = Decision.objects.create(patient_id=patient.pk, region=patient.region, question="Is my valsartan safe?",
                                       subject="valsartan", verdict="caution", answer="synthetic",
                                       reasoner="rules/1", decided_at=timezone.now())
    for status, expected in [("sent", False), ("approved", True), ("draft", True)]:
        Correction.objects.filter(new_decision=decision).delete()
        correction = _notice(patient, status=status)
        correction.new_decision = decision
        correction.save(update_fields=["new_decision"])
        found = pending_corrections([decision.id - 1, decision.id, decision.id + 1], lock=False)
        assert (decision.id in found) is expected, status
        assert found.get(decision.id, correction).id == correction.id
