"""A draft has one home (corrections.drafts): the per-decision sweep (ORM saves) and the set-based
page (COPY) write the same draft for the same decision change — subject line, dedupe key, recipient,
channel, body, and the correction's recall, class and severity — and a message goes where
Patient.contact says."""

from datetime import UTC, datetime

import pytest
from django.db import connection

from ask.services import ask
from corrections.models import Correction, OutboxMessage
from corrections.sweep.run import sweep
from corrections.triggers import auto_sweep_suppressed
from memory.fact_writes import assert_claim
from patients.models import DispensingRecord, Patient
from tests.factories import recall_claim

pytestmark = pytest.mark.django_db(transaction=True)

DRUG = "Valsartan Tablets USP 40 mg"
RECALL, LOT = "D-0315-2019", "3061169"  # real: Class II, Mylan valsartan
MESSAGE = ("subject", "dedupe_key", "recipient", "channel", "body", "status")
DRAFT = ("dedupe_key", "recall_number", "classification", "severity", "match", "match_class", "old_verdict",
         "new_verdict", "drafted_text", "status")


def _restart():
    tables = [t for t in connection.introspection.django_table_names(only_existing=True)
              if not t.startswith(("django_", "auth_"))]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")


def _patient(ref, *, channel="email", language="en", phone="+15555550100"):
    patient = Patient.objects.create(region="aws-us-east-1", display_name=f"Synthetic {ref}", external_ref=ref,
                                     email=f"{ref.lower()}@example.com", phone=phone, preferred_channel=channel,
                                     preferred_language=language, synthetic=True)
    DispensingRecord.objects.create(patient=patient, drug=DRUG, lot=LOT, synthetic=True,
                                    dispensed_at=datetime(2019, 1, 5, tzinfo=UTC))
    return patient


def _escalation() -> tuple[list, list]:
    """Three patients asked, then the recall went to Class I and the sweep ran: the drafts' columns."""
    _restart()
    with auto_sweep_suppressed():
        assert_claim(recall_claim(RECALL, LOT))
        for patient in (_patient("SYN-EMAIL"), _patient("SYN-SMS-ES", channel="sms", language="es"),
                        _patient("SYN-SMS-NOPHONE", channel="sms", phone="")):
            ask(patient, "Is my valsartan safe?")
        assert_claim(recall_claim(RECALL, LOT, classification="Class I"), reason="escalated to Class I")
        report = sweep(page_size=10)
    messages = list(OutboxMessage.objects.order_by("correction__patient__external_ref").values_list(*MESSAGE))
    drafts = list(Correction.objects.order_by("patient__external_ref").values_list(*DRAFT))
    return report, messages, drafts


def test_both_sweep_paths_write_the_same_draft_for_the_same_change(hashing_embeddings, monkeypatch):
    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_SET_BASED", False)
    per_decision, orm_messages, orm_drafts = _escalation()
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_SET_BASED", True)
    set_based, copied_messages, copied_drafts = _escalation()

    assert per_decision.set_pages == 0 and set_based.set_pages >= 1
    assert len(orm_messages) == 3  # the story drafts what it claims to compare
    assert copied_messages == orm_messages
    assert copied_drafts == orm_drafts


def test_a_draft_goes_where_the_patient_record_says(hashing_embeddings, monkeypatch):
    monkeypatch.setenv("UNSAY_SWEEP_ON_SUPERSESSION", "0")
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_SET_BASED", True)
    _report, messages, _drafts = _escalation()
    by_recipient = {(channel, recipient): (subject, status) for subject, _k, recipient, channel, _b, status in messages}
    assert set(by_recipient) == {("email", "syn-email@example.com"), ("sms", "+15555550100"), ("sms", "")}
    assert all(status == OutboxMessage.Status.HELD for _s, status in by_recipient.values())  # none leaves unreviewed
    for patient in Patient.objects.all():
        assert patient.contact() == (patient.preferred_channel,
                                     patient.phone if patient.preferred_channel == "sms" else patient.email)
    assert Patient(preferred_channel="", email="a@example.com").contact() == ("email", "a@example.com")
