"""Erasure on request: a patient's name, contact details and free text are gone everywhere the app keeps
them, pending letters are never sent, the recall report still counts them, a certificate says what was
done, and the audit chain still verifies (and still catches tampering). Patients are synthetic; the
recall is the real D-0315-2019 (tests.factories)."""

import json
from io import StringIO

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.db import connection

from core.audit_verify import verify_chain
from core.models import AuditLink
from corrections import review
from corrections.models import AuditEvent, Correction, OutboxMessage
from memory.models import Decision
from outbox.dispatch import dispatch_ready
from patients.models import Patient
from privacy.models import ErasureCertificate
from privacy.services import erase_patient
from tests.factories import RECALL
from worklist import recall_report, services

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


def _erase(ref: str) -> dict:
    out = StringIO()
    call_command("erase_patient", ref, "--reason", "erasure request of 2026-12-01", "--by", "dpo", stdout=out)
    return json.loads(out.getvalue())


def _everything_about(patient_id) -> str:
    """Every text column the app keeps about a patient, joined: what a search for their name would read."""
    parts = [str(list(Patient.objects.filter(pk=patient_id).values()))]
    parts += [str(list(Decision.objects.filter(patient_id=patient_id).values("question", "answer")))]
    parts += [str(list(Correction.objects.filter(patient_id=patient_id).values(
        "old_answer", "new_answer", "drafted_text", "final_text")))]
    parts += [str(list(OutboxMessage.objects.filter(correction__patient_id=patient_id).values(
        "recipient", "subject", "body")))]
    parts += [str(list(AuditEvent.objects.filter(correction__patient_id=patient_id).values("before", "after", "note")))]
    from worklist.models import ContactAttempt
    parts += [str(list(ContactAttempt.objects.filter(patient_id=patient_id).values("note")))]
    return " ".join(parts)


def test_erasure_removes_personal_data_cancels_pending_letters_and_keeps_the_chain(people, drafts):
    phil = people["pharmacist"]
    sent, pending = drafts["SYN-A"], drafts["SYN-B"]
    review.approve(sent.pk, user=phil)
    assert dispatch_ready().sent == 1  # SYN-A's letter went out before the request
    review.approve(pending.pk, user=phil)  # SYN-B's letter is approved, not yet sent
    services.log_contact(RECALL, pending.patient, user=phil, method="phone", outcome="reached",
                         note=f"spoke to {pending.patient.display_name} at {pending.patient.email}")
    patient = pending.patient
    name, email = patient.display_name, patient.email
    assert name in _everything_about(patient.pk) and email in _everything_about(patient.pk)
    exposed_before = recall_report.report(RECALL)["summary"]["exposed"]

    certificate = _erase(patient.external_ref)

    text = _everything_about(patient.pk)
    assert name not in text and email not in text and patient.external_ref not in text
    patient.refresh_from_db()
    assert patient.display_name == "Erased patient" and patient.email == "" and patient.dispensings.exists()
    pending.refresh_from_db()
    assert pending.status == "stale" and pending.message.status == "cancelled"
    assert dispatch_ready().sent == 0  # never sent after the erasure
    assert certificate["counts"]["pending work ended"]["outbox messages cancelled"] == 1
    assert certificate["counts"]["decisions"] >= 1 and certificate["counts"]["audit events"] >= 2
    assert certificate["audit_chain_head"]["seq"] == AuditLink.objects.count()
    stored = ErasureCertificate.objects.get(pk=certificate["certificate"])
    assert stored.erased_by == "command:dpo" and stored.patient_public_id == patient.public_id
    # Recall work still counts the patient; the other patients are untouched.
    assert recall_report.report(RECALL)["summary"]["exposed"] == exposed_before
    sent.refresh_from_db()
    assert sent.status == "sent" and sent.patient.display_name != "Erased patient"
    # The chain verifies, and tampering after the erasure is still found.
    assert verify_chain().ok
    with connection.cursor() as cursor:
        cursor.execute("UPDATE corrections_auditevent SET note = 'x' WHERE correction_id = %s", [sent.pk])
    assert not verify_chain().ok


def test_an_event_marked_erased_without_an_erasure_breaks_the_chain(people, drafts):
    review.approve(drafts["SYN-A"].pk, user=people["pharmacist"])
    assert verify_chain().ok
    AuditEvent.objects.filter(correction=drafts["SYN-A"]).update(after={}, redacted=True)
    result = verify_chain()
    assert not result.ok and "no erasure names it" in result.reason


def test_only_a_user_with_the_permission_erases_and_a_reason_is_required(people, drafts, client):
    from django.contrib.auth.models import Permission

    phil = people["pharmacist"]
    patient = drafts["SYN-D"].patient
    with pytest.raises(PermissionDenied):
        erase_patient(patient, by=phil, reason="request")
    phil.user_permissions.add(Permission.objects.get(codename="erase_patient"))
    phil = type(phil).objects.get(pk=phil.pk)  # permission cache
    with pytest.raises(ValueError, match="needs a reason"):
        erase_patient(patient, by=phil, reason="  ")
    with pytest.raises(CommandError, match="No patient"):
        _erase("NO-SUCH-REF")
    # The admin's erasure form: the pharmacist confirms, the certificate is shown.
    phil.is_staff = True
    phil.save()
    client.force_login(phil)
    form = client.get("/admin/privacy/erasurecertificate/add/")
    assert form.status_code == 200 and "Patient reference" in form.content.decode()
    unconfirmed = client.post("/admin/privacy/erasurecertificate/add/",
                              {"patient_ref": patient.external_ref, "reason": "request of 2026-12-01"})
    assert unconfirmed.status_code == 200 and not ErasureCertificate.objects.exists()
    done = client.post("/admin/privacy/erasurecertificate/add/",
                       {"patient_ref": patient.external_ref, "reason": "request of 2026-12-01", "confirm": "on"})
    assert done.status_code == 302
    certificate = ErasureCertificate.objects.get()
    assert certificate.erased_by == "phil" and Patient.objects.get(pk=patient.pk).display_name == "Erased patient"
    assert certificate.chain_head_seq == AuditLink.objects.count()  # stamped after the admin's commit
    assert drafts["SYN-D"].__class__.objects.get(pk=drafts["SYN-D"].pk).status == "rejected"
    assert verify_chain().ok
