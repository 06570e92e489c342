"""Every change a standing answer rests on triggers a sweep that reaches the patient.

Real records: D-1536-2022 (Lupin lisinopril 10 mg, lot Q201182, Class II, Ongoing; new in the
2023-08-05 bulk part) and the HUMIRA (adalimumab) label with a boxed warning. Patients and
dispensing are synthetic. The after-commit triggers are switched on and their Celery tasks run in
process, as a worker would run them.
"""

import json
from datetime import UTC, datetime

import pytest

from ask.services import ask
from corrections import tasks
from corrections.models import Correction, SweepRun
from memory.models import Decision
from outbox import tasks as outbox_tasks
from patients.dispensing import save_dispensing
from patients.models import DispensingChange, DispensingRecord
from recalls.services import ingest_document
from tests.factories import FIXTURES, SNAPSHOT_2023, make_patient, openfda_record

pytestmark = pytest.mark.django_db(transaction=True)



def _record(recall_number):
    return openfda_record(recall_number, SNAPSHOT_2023)


@pytest.fixture
def triggers_run_inline(monkeypatch, hashing_embeddings):
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", True)
    monkeypatch.setattr(tasks.sweep_facts, "delay", lambda ids: tasks.sweep_facts(ids))
    monkeypatch.setattr(tasks.sweep_patients, "delay", lambda ids: tasks.sweep_patients(ids))
    monkeypatch.setattr(outbox_tasks.dispatch_outbox, "delay", lambda *a, **k: None)


def _patient(ref, drug=None, lot=None):
    # Dispensing through patients.services.save_dispensing: its change signal is one of the triggers.
    return make_patient(ref, [(drug, lot)] if drug else [], phone="", dispensed_at=datetime(2023, 2, 1, tzinfo=UTC),
                        through_service=True)


def test_a_brand_new_recall_by_ingestion_corrects_the_reassured_and_notifies_the_rest(triggers_run_inline):
    asker = _patient("SYN-LIS-1", "Lisinopril Tablets USP 10 mg", "Q201182")
    holder = _patient("SYN-LIS-2", "Lisinopril Tablets USP 10 mg", "Q201182")
    told = ask(asker, "Is my lisinopril safe?")
    assert told.verdict == "safe"

    ingest_document({"results": [_record("D-1536-2022")]})

    run = SweepRun.objects.get(trigger=SweepRun.Trigger.SUPERSESSION)
    assert (run.status, run.corrected, run.notices) == ("succeeded", 1, 1)
    correction = Correction.objects.get(kind="correction")
    assert (correction.patient, correction.old_verdict, correction.new_verdict) == (asker, "safe", "caution")
    assert correction.recall_number == "D-1536-2022"
    assert Correction.objects.get(kind="notice").patient == holder
    told.refresh_from_db()
    assert told.status == Decision.Status.SUPERSEDED


def test_a_lot_added_to_an_amended_recall_reaches_the_patient(triggers_run_inline):
    first = dict(_record("D-1536-2022"), code_info="Lot # Q201181, exp. date March 2024")  # before the amendment
    ingest_document({"results": [first]})
    asker = _patient("SYN-LIS-3", "Lisinopril Tablets USP 10 mg", "Q201182")
    assert ask(asker, "Is my lisinopril safe?").verdict == "safe"

    ingest_document({"results": [_record("D-1536-2022")]})  # the real record: lot Q201182

    correction = Correction.objects.get(kind="correction")
    assert (correction.patient, correction.new_verdict) == (asker, "caution")


def test_staff_correcting_a_mistyped_lot_re_decides_the_answer(triggers_run_inline):
    ingest_document({"results": [_record("D-1536-2022")]})
    patient = _patient("SYN-LIS-4", "Lisinopril Tablets USP 10 mg", "Q201128")  # mistyped
    assert ask(patient, "Is my lisinopril safe?").verdict == "safe"

    row = patient.dispensings.get()
    row.lot = "Q201182"
    save_dispensing(row, actor="staff")

    assert DispensingChange.objects.filter(dispensing_id=row.pk).count() == 2
    run = SweepRun.objects.get(trigger=SweepRun.Trigger.DISPENSING)
    assert run.patient_ids == [patient.pk] and run.corrected == 1
    correction = Correction.objects.get(kind="correction")
    assert (correction.old_verdict, correction.new_verdict) == ("safe", "caution")
    assert correction.recall_number == "D-1536-2022"


def test_a_dispensing_registered_after_the_recall_gets_a_notice(triggers_run_inline):
    ingest_document({"results": [_record("D-1536-2022")]})
    patient = _patient("SYN-LIS-5", "Lisinopril Tablets USP 10 mg", "Q201182")

    notice = Correction.objects.get(kind="notice")
    assert notice.patient == patient and notice.new_verdict == "caution"
    # registering a second fill of the same lot drafts nothing twice
    save_dispensing(DispensingRecord(patient=patient, drug="lisinopril", lot="Q201182", synthetic=True,
                                     dispensed_at=datetime(2023, 3, 1, tzinfo=UTC)), actor="test")
    assert Correction.objects.filter(kind="notice").count() == 1


def test_a_new_label_warning_re_decides_answers_about_the_drug(triggers_run_inline):
    labels = json.loads((FIXTURES / "drug-label-sample.json").read_text())
    humira = next(r for r in labels["results"] if r.get("boxed_warning"))
    patient = _patient("SYN-ADA-1", "adalimumab", "ZZ-SYN-ADA")
    decision = ask(patient, "Is my adalimumab safe?")

    from recalls.models import IngestRun

    ingest_document({"results": [humira]}, kind=IngestRun.Kind.LABEL)

    decision.refresh_from_db()
    assert decision.status == Decision.Status.SUPERSEDED
    new = decision.replaced_by
    assert new.reads.filter(fact__kind="label").exists()
