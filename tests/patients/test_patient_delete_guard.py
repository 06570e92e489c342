"""A decision holds its patient by id (memory sits below patients, so no foreign key points up): the
patients side reads decisions' patients in one query, refuses to delete a patient who has decisions
(what the foreign key's PROTECT did), and the admin still shows and links a decision's patient."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import ProtectedError
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.models import Decision
from patients.models import DispensingRecord, Patient
from patients.selectors import attach_patients, patients_by_id
from privacy.services import erase_patient
from tests.factories import make_patient

pytestmark = pytest.mark.django_db


def _decision(patient, question="Is my valsartan safe?") -> Decision:
    return Decision.objects.create(patient_id=patient.pk if patient else None, region=getattr(patient, "region", ""),
                                   question=question, subject="valsartan", verdict="safe", answer="synthetic",
                                   reasoner="rules/1", decided_at=timezone.now())


def test_a_patient_who_has_decisions_is_never_deleted():
    patient = make_patient("SYN-DEL1", [("valsartan", "A1")])
    _decision(patient)
    with pytest.raises(ProtectedError, match="1 decision\\(s\\) were recorded.*erase"), transaction.atomic():
        patient.delete()
    with pytest.raises(ProtectedError), transaction.atomic():
        Patient.objects.filter(pk=patient.pk).delete()
    assert Patient.objects.filter(pk=patient.pk).exists()
    assert DispensingRecord.objects.filter(patient=patient).exists()  # nothing of theirs went either


def test_a_patient_without_decisions_is_deleted():
    patient = make_patient("SYN-DEL2", [("valsartan", "A1")])
    _decision(make_patient("SYN-DEL3"))  # someone else's decision does not hold this one
    patient.delete()
    assert not Patient.objects.filter(external_ref="SYN-DEL2").exists()


def test_erasure_of_a_patient_with_decisions_still_works():
    patient = make_patient("SYN-DEL4", [("valsartan", "A1")])
    decision = _decision(patient, question="Is my valsartan safe? I am Synthetic SYN-DEL4.")
    certificate = erase_patient(patient, by="dpo", reason="erasure request of 2026-12-04")
    decision.refresh_from_db()
    assert certificate.counts["decisions"] == 1 and "SYN-DEL4" not in decision.question
    assert decision.patient_id == patient.pk  # the decision still says whose it was, by id


def test_the_patients_of_a_page_of_decisions_are_read_in_one_query():
    people = [make_patient(f"SYN-SEL{n}") for n in range(5)]
    for person in people:
        _decision(person)
        _decision(person, question="And my other tablets?")
    _decision(None)
    decisions = list(Decision.objects.order_by("id"))
    with CaptureQueriesContext(connection) as queries:
        attach_patients(decisions, defer=("created", "updated"))
    assert len(queries) == 1
    assert [d.patient.external_ref if d.patient else None for d in decisions] == (
        [p.external_ref for p in people for _ in range(2)] + [None])
    assert patients_by_id([None]) == {}


def test_the_admin_lists_a_decisions_patient_and_refuses_to_delete_them(client):
    patient = make_patient("SYN-DEL5")
    decision = _decision(patient)
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.test", "pw"))
    listing = client.get("/admin/memory/decision/").content.decode()
    assert f'/admin/patients/patient/{patient.pk}/change/' in listing
    detail = client.get(f"/admin/memory/decision/{decision.pk}/change/").content.decode()
    assert f"patient {patient.pk}" in detail
    confirm = client.get(f"/admin/patients/patient/{patient.pk}/delete/")
    assert confirm.status_code == 200 and "1 recorded decision(s)" in confirm.content.decode()
    refused = client.post(f"/admin/patients/patient/{patient.pk}/delete/", {"post": "yes"})
    assert refused.status_code in (200, 403)
    assert Patient.objects.filter(pk=patient.pk).exists()


def test_the_decision_patient_column_has_no_foreign_key_and_keeps_its_index():
    """Migration memory 0013 dropped only the constraint: same column, same composite index."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "memory_decision")
    on_patient = [c for c in constraints.values() if c["columns"][:1] == ["patient_id"]]
    assert not any(c["foreign_key"] for c in on_patient)
    assert constraints["decision_patient_subject"]["columns"] == ["patient_id", "subject", "decided_at"]
