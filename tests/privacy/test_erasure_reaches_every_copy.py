"""Erasure reaches every copy in the database. A synthetic patient goes through every path that writes
about them (CSV import and an admin edit, which leave admin log entries; dispensing; a patient key asking
through the API; a letter drafted, approved and sent; a reply; contact and recall-step notes; a session
holding an admin message), is erased, and then every text and JSON column of every table, every session and
the cache are searched for their name, reference, email and phone: a table added later that keeps a copy
fails here. The recall is the real D-0315-2019 (tests.factories)."""

import json
from io import StringIO

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.sessions.models import Session
from django.core.management import call_command

from ask.keys import issue_key
from ask.models import ApiClient, ApiKey, ClientPatient, UsageCounter
from core.audit_verify import verify_chain
from corrections import review
from corrections.models import AuditEvent, Correction
from corrections.sweep.run import sweep
from memory.models import Decision
from outbox.dispatch import dispatch_ready
from patients.dispensing import save_dispensing
from patients.models import DispensingRecord, Patient
from patients.patient_import import import_patients_csv
from replies import links
from replies.services import record_reply
from tests.factories import LOT, RECALL, VALSARTAN, escalate
from tests.privacy import traces
from worklist import services as worklist

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]

NAME, REF, EMAIL, PHONE = "Zelda Quintavalle", "SYN-ZQ-7731", "zelda.quintavalle@example.com", "+15555550143"
TRACES = [NAME, REF, EMAIL, PHONE]
PATIENTS_CSV = ("external_ref,display_name,region,preferred_channel,email,phone\n"
                f"{REF},{NAME},aws-us-east-1,email,{EMAIL},{PHONE}\n")


def _erase(ref: str) -> dict:
    out = StringIO()
    call_command("erase_patient", ref, "--reason", "erasure request of 2026-12-01", "--by", "dpo", stdout=out)
    return json.loads(out.getvalue())


def _ask(client, secret, question):
    return client.post("/api/v1/ask", data=json.dumps({"question": question}), content_type="application/json",
                       headers={"Authorization": f"Bearer {secret}"})


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("ada-admin", password="pw")


@pytest.fixture
def zelda(world, people, admin_user, client, settings, no_auto_sweep):
    """Zelda's life in the pharmacy, through the product's own paths; returns her patient and key secret."""
    settings.MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"
    assert import_patients_csv(PATIENTS_CSV.encode(), user=admin_user, synthetic=True).imported == 1
    patient = Patient.objects.get(external_ref=REF)
    dispensed = save_dispensing(DispensingRecord(patient=patient, drug=VALSARTAN, lot=LOT, synthetic=True,
                                                 dispensed_at=world["decisions"]["a"].decided_at), actor="test")
    # What the dispensing admin records for a change: the row's text names the patient's reference.
    LogEntry.objects.log_actions(admin_user.pk, [dispensed], CHANGE, [{"changed": {"fields": ["Lot"]}}])
    pharmacy = ApiClient.objects.create(name="North (synthetic)")
    ClientPatient.objects.create(client=pharmacy, patient=patient)
    _, secret = issue_key(pharmacy, kind=ApiKey.Kind.PATIENT, patient=patient)
    assert _ask(client, secret, f"I am {NAME} ({PHONE}), is my valsartan safe?").status_code == 200
    # The admin edit: the change and its success message (kept in the session) name her.
    client.force_login(admin_user)
    change = f"/admin/patients/patient/{patient.pk}/change/"
    form = {"display_name": NAME, "external_ref": REF, "region": "aws-us-east-1", "preferred_channel": "email",
            "preferred_language": "en", "email": EMAIL, "phone": "+1 555 555 0143",
            "dispensings-TOTAL_FORMS": "0", "dispensings-INITIAL_FORMS": "0"}
    form.update({f"dispensings-{k}": v for k, v in (("MIN_NUM_FORMS", "0"), ("MAX_NUM_FORMS", "1000"))})
    response = client.post(change, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    escalate()
    sweep()
    correction = Correction.objects.get(patient=patient)
    phil = people["pharmacist"]
    review.approve(correction.pk, user=phil)
    assert dispatch_ready().sent == 1
    link, _ = links.link_for(correction.message)
    record_reply(link, "question", text=f"This is {NAME}, call me on {PHONE}")
    worklist.log_contact(RECALL, patient, user=phil, method="phone", outcome="reached",
                         note=f"spoke to {NAME} at {EMAIL}")
    worklist.complete_step(RECALL, "acknowledge", user=phil, note=f"{NAME} ({REF}) phoned about it first")
    return patient, secret


def test_no_trace_of_an_erased_patient_is_left_in_any_table_session_or_cache(zelda):
    patient, _ = zelda
    before = traces.everywhere(TRACES)
    assert any(hit.startswith("django_admin_log.") for hit in before)  # the walk sees what it looks for
    assert any(hit.startswith("django_session") for hit in before)

    certificate = _erase(REF)

    left = traces.everywhere(TRACES)
    assert left == [], '\n'.join(left)
    touched = certificate["tables"]
    for table in ("patients_patient", "django_admin_log", "django_session", "ask_apikey", "memory_decision",
                  "corrections_correction", "corrections_outboxmessage", "worklist_contactattempt",
                  "worklist_recalltask", "worklist_workevent"):
        assert touched.get(table, 0) >= 1, (table, touched)
    assert verify_chain().ok


def test_an_erased_patients_key_is_revoked_and_its_use_refused_audited_and_not_stored(zelda, client):
    patient, secret = zelda
    decisions = Decision.objects.filter(patient_id=patient.pk).count()

    certificate = _erase(REF)

    assert certificate["tables"]["ask_apikey"] == 1
    assert not ApiKey.objects.filter(patient=patient).active().exists()
    for _ in range(2):
        response = _ask(client, secret, f"It is {NAME} again")
        assert response.status_code == 401 and response.json()["title"] == "Missing, unknown or revoked API key"
    assert Decision.objects.filter(patient_id=patient.pk).count() == decisions
    key = ApiKey.objects.get(patient=patient)
    refused = AuditEvent.objects.filter(action=AuditEvent.Action.ERASED_KEY_REFUSED).get()  # once an hour
    assert refused.after["key"] == key.prefix and refused.actor_label == "api"
    assert UsageCounter.objects.get(scope=f"erased-key:{key.pk}").n == 2  # every refusal counted
    assert NAME not in str(refused.after) and traces.everywhere(TRACES) == []
    assert verify_chain().ok


def test_an_erased_patients_key_found_active_is_refused_and_none_can_be_issued(zelda, client):
    patient, secret = zelda
    _erase(REF)
    ApiKey.objects.filter(patient=patient).update(revoked_at=None)  # active again, whatever the way
    assert _ask(client, secret, "Is my valsartan safe?").status_code == 401
    assert not ApiKey.objects.filter(patient=patient).active().exists()  # revoked when presented
    patient.refresh_from_db()
    pharmacy = ClientPatient.objects.get(patient=patient).client
    with pytest.raises(ValueError, match="erased"):
        issue_key(pharmacy, kind=ApiKey.Kind.PATIENT, patient=patient)


def test_erasure_leaves_other_patients_admin_log_and_sessions_alone(zelda, admin_user):
    other = Patient.objects.get(external_ref="SYN-A")
    LogEntry.objects.log_actions(admin_user.pk, [other], ADDITION, "Added by CSV import.")
    others = LogEntry.objects.filter(object_id=str(other.pk), content_type__model="patient")
    others_before = list(others.values_list("object_repr", "change_message"))
    sessions_before = Session.objects.count()

    _erase(REF)

    assert list(others.values_list("object_repr", "change_message")) == others_before
    assert Session.objects.count() == sessions_before  # a session is cleaned, not ended


# Tables tied to a patient that the erasure leaves as they are, and why: none holds free text or contact.
KEPT_AS_THEY_ARE = {
    "patients_dispensingrecord": "what was dispensed (drug, NDC, lot, dates): what recall work counts",
    "patients_dispensingchange": "the dispensing fields before and after a change, and who changed them",
    "ask_clientpatient": "which pharmacy client the patient belongs to",
    "worklist_patienttask": "a recall task's reason (a choice) and its state",
}


def test_every_table_tied_to_a_patient_is_reached_by_the_erasure_or_kept_for_a_stated_reason():
    from django.apps import apps

    from privacy.services import TABLE_OF_KIND

    reached = {model._meta.db_table for model in TABLE_OF_KIND.values()} | {ApiKey._meta.db_table}
    tied = set()
    for model in apps.get_models(include_auto_created=True):
        for field in model._meta.concrete_fields:
            to_patient = field.is_relation and field.related_model is Patient
            if to_patient or field.column == "patient_id" or model is Patient:
                tied.add(model._meta.db_table)
    assert tied - reached - set(KEPT_AS_THEY_ARE) == set()
    assert set(KEPT_AS_THEY_ARE) <= tied  # the list names no table that is gone


def test_a_pharmacy_key_cannot_ask_about_an_erased_patient_by_the_reference_erasure_left(zelda, client):
    patient, _ = zelda
    _erase(REF)
    patient.refresh_from_db()
    pharmacy = ClientPatient.objects.get(patient=patient).client
    _, secret = issue_key(pharmacy)
    decisions = Decision.objects.filter(patient_id=patient.pk).count()
    for named in (patient.external_ref, str(patient.public_id)):
        response = client.post("/api/v1/ask", data=json.dumps({"question": "Is it safe?", "patient": named}),
                               content_type="application/json", headers={"Authorization": f"Bearer {secret}"})
        assert response.status_code == 404, response.content
    assert Decision.objects.filter(patient_id=patient.pk).count() == decisions
