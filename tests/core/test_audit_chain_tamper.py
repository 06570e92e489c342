"""Someone with write access to the database but not the audit key changes the record: every change is
found by `manage.py verify_audit`, which names the table, the row and what failed. The command runs as a
process where its exit status is what is tested (what a monitor sees: an intact chain, a broken one, keys
and the anchor file from the environment); elsewhere it runs in this process (call_command: the same
verification and message, without a Django start-up a check). One chain holds the corrections audit, the
worklist's contact log, the shelf's quarantine confirmations and the dispensing changes (core.audit_chain).
Patients are synthetic (tests.factories.make_patient)."""

import hashlib
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from core import audit_chain
from core.audit_chain import link_hash, redactable_digest, structure_of
from core.models import AuditChainHead, AuditLink
from corrections import audit
from corrections.models import AuditEvent
from patients.dispensing import save_dispensing
from patients.models import DispensingChange, DispensingRecord
from privacy.services import erase_patient
from shelf.models import ShelfEvent
from tests.factories import make_patient
from tests.procs import manage
from worklist.models import WorkEvent

pytestmark = pytest.mark.django_db(transaction=True)

RECALL = "D-0315-2019"


@pytest.fixture
def chain(people):
    """One event of each audited kind, each sealed by its writer after its commit, in this order:
    corrections (1), worklist contact log (2), shelf quarantine (3), dispensing change (4), corrections (5)."""
    phil = people["pharmacist"]
    patient = make_patient("SYN-T1", name="Tess Tamper (synthetic)")
    events = {
        "audit": audit.record(AuditEvent.Action.APPROVED, by=phil, before={"status": "draft"},
                              after={"status": "approved"}, note="letter approved"),
        "contact": WorkEvent.objects.create(actor=phil, actor_label="phil", action=WorkEvent.Action.CONTACT,
                                            recall_number=RECALL, patient=patient,
                                            details={"method": "phone", "outcome": "no_answer", "note": "voicemail"}),
        "quarantine": ShelfEvent.objects.create(actor=phil, actor_label="phil", action=ShelfEvent.Action.QUARANTINED,
                                                site="Main St", recall_number=RECALL,
                                                details={"expected": 4, "counted": 4, "note": ""}),
    }
    row = save_dispensing(DispensingRecord(patient=patient, synthetic=True, drug="lisinopril", lot="ABC123",
                                           dispensed_at=timezone.now()), actor="phil")
    events["dispensing"] = DispensingChange.objects.get(dispensing_id=row.pk)
    events["later"] = audit.record(AuditEvent.Action.SENT, by="dispatcher", after={"status": "sent"})
    for event in events.values():
        event.refresh_from_db()
    assert [e.seq for e in events.values()] == [1, 2, 3, 4, 5]
    events["patient"], events["people"] = patient, people
    return events


def _verify_fails() -> str:
    """verify_audit's message for a broken chain (the command's CommandError, printed as its stderr)."""
    out = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", stdout=out)
    return str(failed.value)


def _verify_passes() -> str:
    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


def _sql(statement, params=()):
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def test_an_untouched_chain_of_every_kind_verifies(chain):
    done = manage("verify_audit")
    assert done.returncode == 0, done.stderr
    assert "audit chain intact: 5 links verified" in done.stdout
    assert sorted(AuditLink.objects.values_list("event_table", flat=True)) == sorted([
        "corrections_auditevent", "corrections_auditevent", "worklist_workevent", "shelf_shelfevent",
        "patients_dispensingchange"])


@pytest.mark.parametrize(("kind", "table", "seq", "edit"), [
    ("contact", "worklist_workevent", 2,
     "UPDATE worklist_workevent SET details = '{\"method\": \"phone\", \"outcome\": \"reached\"}' WHERE id = %s"),
    ("quarantine", "shelf_shelfevent", 3,
     "UPDATE shelf_shelfevent SET details = '{\"expected\": 4, \"counted\": 3, \"note\": \"\"}' WHERE id = %s"),
    ("dispensing", "patients_dispensingchange", 4,
     "UPDATE patients_dispensingchange SET after = jsonb_set(after, '{lot}', '\"XYZ999\"') WHERE id = %s"),
    ("audit", "corrections_auditevent", 1, "UPDATE corrections_auditevent SET note = 'nothing to see' WHERE id = %s"),
])
def test_an_edited_event_of_any_app_is_named_with_its_table_and_row(chain, kind, table, seq, edit):
    _sql(edit, [chain[kind].pk])
    error = _verify_fails()
    assert f"broken at link {seq} ({table} row {chain[kind].pk})" in error
    assert "were changed after it was sealed" in error


def test_a_forged_unsealed_event_with_a_correct_unkeyed_hash_is_reported_not_sealed(chain):
    """The old chain's content hash used no secret, and verifying sealed unsealed rows first: a forged
    "approved by phil" row became a link."""
    at = timezone.now()
    content = {"at": at.isoformat(), "actor": "phil", "action": "approved", "correction": None, "decision": None,
               "sweep_run": None, "before": {}, "after": {"status": "approved"}, "note": "forged"}
    unkeyed = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    _sql("INSERT INTO corrections_auditevent (at, actor_id, actor_label, action, before, after, note, redacted) "
         "VALUES (%s, %s, 'phil', 'approved', '{}', '{\"status\": \"approved\"}', %s, false)",
         [at, chain["people"]["pharmacist"].pk, f"forged {unkeyed}"])
    forged = AuditEvent.objects.get(note__startswith="forged")
    error = _verify_fails()
    assert f"(corrections_auditevent row {forged.pk}): the event is not in the chain" in error
    assert AuditEvent.objects.get(pk=forged.pk).seq is None  # verifying sealed nothing
    audit.record(AuditEvent.Action.SENT, by="dispatcher")  # nor does the next writer's seal
    assert AuditEvent.objects.get(pk=forged.pk).seq is None


@pytest.mark.parametrize("guessed_key", [b"", b"insecure-production-key-not-for-production"])
def test_a_forged_sealed_event_computed_without_the_key_breaks_at_its_link(chain, guessed_key):
    key_id = audit_chain.signing_key()[0]
    previous = AuditChainHead.objects.get().link_hash
    _sql("INSERT INTO corrections_auditevent (at, actor_id, actor_label, action, before, after, note, seq, redacted) "
         "VALUES (now(), %s, 'phil', 'approved', '{}', '{}', 'forged', 6, false)", [chain["people"]["pharmacist"].pk])
    forged = AuditEvent.objects.get(seq=6)
    digest = redactable_digest(guessed_key, forged, forged.CHAIN_REDACTABLE)
    forged_link = link_hash(guessed_key, previous=previous, seq=6, key_id=key_id, table="corrections_auditevent",
                            row_id=forged.pk, structure=structure_of(forged, forged.CHAIN_STRUCTURE), redactable=digest)
    AuditLink.objects.create(seq=6, event_table="corrections_auditevent", event_id=forged.pk, key_id=key_id,
                             redactable_digest=digest, link_hash=forged_link)
    AuditChainHead.objects.update(seq=6, link_hash=forged_link)
    error = _verify_fails()
    assert f"broken at link 6 (corrections_auditevent row {forged.pk}): the link does not verify" in error


def test_a_forged_event_claiming_a_seq_no_link_gives_is_found(chain):
    _sql("INSERT INTO shelf_shelfevent (at, actor_label, action, site, recall_number, details, seq, redacted) "
         "VALUES (now(), 'phil', 'returned', 'Main St', %s, '{}', 99, false)", [RECALL])
    forged = ShelfEvent.objects.get(seq=99)
    assert f"(shelf_shelfevent row {forged.pk}): the event carries seq 99 but no link seals it" in _verify_fails()


def test_a_deleted_link_is_found_naming_its_event_and_the_process_exits_non_zero(chain):
    _sql("DELETE FROM core_auditlink WHERE seq = 3")
    done = manage("verify_audit")
    assert done.returncode == 1, done.stdout
    assert (f"broken at link 3 (shelf_shelfevent row {chain['quarantine'].pk}): link 3 of this event is missing"
            in done.stderr)
    assert done.stdout == ""


def test_a_deleted_link_and_event_are_found(chain):
    _sql("DELETE FROM core_auditlink WHERE seq = 3")
    _sql("DELETE FROM shelf_shelfevent WHERE id = %s", [chain["quarantine"].pk])
    assert "broken at link 3: link 3 and its event are missing (the next stored link is 4, " \
           "patients_dispensingchange row" in _verify_fails()


def test_a_deleted_event_is_found_at_its_link(chain):
    _sql("DELETE FROM worklist_workevent WHERE id = %s", [chain["contact"].pk])
    assert f"broken at link 2 (worklist_workevent row {chain['contact'].pk}): the event it seals is missing" \
        in _verify_fails()


def test_reordered_events_are_found(chain):
    """The contact log and the quarantine swap places, links and all: the order is under the hash."""
    contact, quarantine = chain["contact"], chain["quarantine"]
    _sql("UPDATE worklist_workevent SET seq = NULL WHERE id = %s", [contact.pk])
    _sql("UPDATE shelf_shelfevent SET seq = 2 WHERE id = %s", [quarantine.pk])
    _sql("UPDATE worklist_workevent SET seq = 3 WHERE id = %s", [contact.pk])
    _sql("UPDATE core_auditlink SET event_table = 'x', event_id = 0 WHERE seq = 2")
    _sql("UPDATE core_auditlink SET event_table = 'worklist_workevent', event_id = %s WHERE seq = 3", [contact.pk])
    _sql("UPDATE core_auditlink SET event_table = 'shelf_shelfevent', event_id = %s WHERE seq = 2", [quarantine.pk])
    assert f"broken at link 2 (shelf_shelfevent row {quarantine.pk}): the link does not verify" in _verify_fails()


def test_a_changed_actor_id_is_found(chain, django_user_model):
    mallory = django_user_model.objects.create_user("mallory-synthetic")
    _sql("UPDATE corrections_auditevent SET actor_id = %s WHERE id = %s", [mallory.pk, chain["audit"].pk])
    assert f"broken at link 1 (corrections_auditevent row {chain['audit'].pk}): the link does not verify" \
        in _verify_fails()


@pytest.mark.parametrize("rewrite", [
    "UPDATE worklist_workevent SET action = 'none_found' WHERE id = %s",
    "UPDATE worklist_workevent SET actor_label = 'sam' WHERE id = %s",
    "UPDATE worklist_workevent SET at = at - interval '3 days' WHERE id = %s",
])
def test_an_erased_event_still_verifies_but_a_rewrite_of_its_action_actor_or_time_is_found(chain, rewrite):
    """An erasure blanks the contact log's details (the note may name the patient); what happened, who did
    it and when stay under the hash. The redacted events skipped every check in the old chain."""
    erase_patient(chain["patient"], by="dpo", reason="erasure request of 2026-12-01 (synthetic)")
    contact = WorkEvent.objects.get(pk=chain["contact"].pk)
    assert contact.redacted and contact.details == {}
    assert "audit chain intact" in _verify_passes()
    _sql(rewrite, [contact.pk])
    error = _verify_fails()
    assert f"broken at link 2 (worklist_workevent row {contact.pk}): the link does not verify" in error


def test_a_redaction_no_erasure_names_is_found(chain):
    _sql("UPDATE patients_dispensingchange SET after = '{}', redacted = true WHERE id = %s", [chain["dispensing"].pk])
    assert (f"broken at link 4 (patients_dispensingchange row {chain['dispensing'].pk}): the event is marked "
            "redacted but no erasure names it") in _verify_fails()


def test_links_signed_with_a_retired_key_verify_and_a_key_not_held_is_named(chain, settings):
    old_id = settings.UNSAY_AUDIT_KEY_ID
    new_secret = "synthetic-rotation-key-0123456789abcdefghij"
    settings.UNSAY_AUDIT_KEYS = {**settings.UNSAY_AUDIT_KEYS, "k2026": new_secret.encode()}
    settings.UNSAY_AUDIT_KEY_ID = "k2026"
    audit.record(AuditEvent.Action.SENT, by="dispatcher")  # signed with the new key
    assert list(AuditLink.objects.order_by("seq").values_list("key_id", flat=True)) == [old_id] * 5 + ["k2026"]
    lost_old_key = manage("verify_audit", UNSAY_AUDIT_KEY=f"k2026:{new_secret}")
    assert lost_old_key.returncode != 0
    assert f"broken at link 1 (corrections_auditevent row {chain['audit'].pk}): it is signed with key " \
           f"'{old_id}', which this deployment does not hold" in lost_old_key.stderr
    retired = f"{old_id}:{settings.UNSAY_AUDIT_KEYS[old_id].decode()}"
    done = manage("verify_audit", UNSAY_AUDIT_KEY=f"k2026:{new_secret}", UNSAY_AUDIT_RETIRED_KEYS=retired)
    assert done.returncode == 0, done.stderr
    assert "6 links verified" in done.stdout


def test_links_deleted_from_the_end_with_the_head_rewound_are_found_by_the_anchor(chain, tmp_path):
    """Deleting the newest events and links and rewinding the head leaves a chain that verifies on its own;
    the head written outside the database (manage.py anchor_audit) still names the deleted link."""
    anchors = tmp_path / "audit-anchor.txt"
    assert manage("anchor_audit", UNSAY_AUDIT_ANCHOR_FILE=anchors).returncode == 0
    assert anchors.read_text().startswith("5 ")
    fourth = AuditLink.objects.get(seq=4)
    _sql("DELETE FROM core_auditlink WHERE seq = 5")
    _sql("DELETE FROM corrections_auditevent WHERE id = %s", [chain["later"].pk])
    AuditChainHead.objects.update(seq=4, link_hash=fourth.link_hash)
    assert "audit chain intact" in _verify_passes()  # the chain alone cannot show it
    done = manage("verify_audit", UNSAY_AUDIT_ANCHOR_FILE=anchors)
    assert done.returncode != 0
    assert "broken at its anchor: link 5, anchored at" in done.stderr
    assert "is no longer in the chain: links were deleted from its end" in done.stderr
