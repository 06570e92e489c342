"""Writing a draft: the Correction row, its held OutboxMessage and the DRAFTED audit event.

The per-decision path (corrections.sweep.one_by_one) saves these through the ORM; the set-based
page (corrections.sweep.pages) COPYs them. Both build their values here — the dedupe key, the
recipient, the subject line, the classification and severity, the audit before/after — so the two
paths write the same rows (tests/corrections/test_drafts.py) and a rule changed here changes both.
"""

import hashlib

from drugs.recall_terms import severity

from . import audit, transitions
from .drafting import fact_diff, letter_subject, subject_kind
from .models import AuditEvent, Correction, OutboxMessage

SWEEP_ACTOR = audit.SWEEP

# A draft the patient may still hear (or has heard): a second change with its key coalesces into it.
LIVE_STATUSES = {Correction.Status.DRAFT, Correction.Status.APPROVED, Correction.Status.SENT}


def dedupe_key(*parts) -> str:
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()


def draft_key(patient_id, subject, new_verdict, change: str) -> str:
    """One live draft per patient, drug, new verdict and change, however many decisions they hold."""
    return dedupe_key("correction", patient_id, subject, new_verdict, change)


def notice_key(patient_id, recall_number: str, verdict, fact_ids) -> str:
    """One notice per patient and recall, for the verdict and the fact versions it names (every lot of
    the recall their packs may match), however many of those facts a sweep examines."""
    return dedupe_key("notice", patient_id, recall_number, verdict, ",".join(str(i) for i in sorted(fact_ids)))


def coalesce(key: str, earlier_status, drafted: set, decision_id) -> tuple[str, bool]:
    """(the key to draft under, whether this change is already drafted). `earlier_status`: the status of
    the stored draft with this key (None if none); `drafted`: keys drafted earlier in this sweep. A
    draft that went stale or was rejected does not absorb a new change: that is a new message."""
    if key in drafted or earlier_status in LIVE_STATUSES:
        return key, True
    if earlier_status is not None:
        return dedupe_key(key, "decision", decision_id), False
    return key, False


def correction_values(*, kind, patient, match, match_class, trigger, previous, old_decision_id, new_decision_id,
                      old_verdict, old_answer, new_verdict, new_answer, text, key, run_id,
                      replaces_id=None) -> dict:
    """A draft Correction's columns, by column name (diff, ids and timestamps are the writer's)."""
    cause = trigger or previous
    attrs = (cause.attributes or {}) if cause else {}
    return {
        "kind": str(kind), "status": Correction.Status.DRAFT.value, "patient_id": patient.pk,
        "region": patient.region or "", "match": str(match), "match_class": match_class or "",
        "recall_number": attrs.get("recall_number", ""), "classification": attrs.get("classification", ""),
        "severity": severity(cause), "old_decision_id": old_decision_id, "new_decision_id": new_decision_id,
        "old_verdict": old_verdict, "old_answer": old_answer, "new_verdict": new_verdict, "new_answer": new_answer,
        "trigger_fact_id": trigger.id if trigger else None, "previous_fact_id": previous.id if previous else None,
        "drafted_text": text, "final_text": "", "dedupe_key": key, "sweep_run_id": run_id,
        "replaces_id": replaces_id, "reviewed_by_id": None, "reviewed_at": None, "rejection_reason": "",
    }


def message_values(patient, correction: dict) -> dict:
    """Its held OutboxMessage's columns: to the patient's current contact (Patient.contact), the
    subject in their language, the drafted text, the draft's dedupe key (also the Message-ID)."""
    channel, recipient = patient.contact()
    return {
        "region": correction["region"], "channel": channel, "recipient": recipient,
        "subject": letter_subject(patient, kind=subject_kind(
            recall_number=correction["recall_number"], verdict=correction["new_verdict"],
            match_class=correction["match_class"]))[:200],
        "body": correction["drafted_text"], "dedupe_key": correction["dedupe_key"],
        "status": OutboxMessage.Status.HELD.value, "attempts": 0, "next_attempt_at": None, "claimed_at": None,
        "claimed_by": "", "provider_id": "", "sent_at": None, "last_error": "",
    }


def drafted_event(correction: dict) -> tuple[dict, dict]:
    """The DRAFTED audit event's before and after."""
    return {"verdict": correction["old_verdict"]}, {"verdict": correction["new_verdict"],
                                                    "status": correction["status"]}


def write_draft(*, kind, patient, match, trigger, previous, old_decision, new_decision, old_verdict, old_answer,
                new_verdict, new_answer, key, text, run, replaces=None, match_class="", matched_lots=()) -> Correction:
    """One draft through the ORM: the Correction, its held message and the audit event, in the caller's
    transaction. `matched_lots`: a notice's Correction.matched_lots."""
    values = correction_values(
        kind=kind, patient=patient, match=match, match_class=match_class, trigger=trigger, previous=previous,
        old_decision_id=old_decision.pk if old_decision else None,
        new_decision_id=new_decision.pk if new_decision else None, old_verdict=old_verdict,
        old_answer=old_answer, new_verdict=new_verdict, new_answer=new_answer, text=text, key=key,
        run_id=run.pk if run is not None else None, replaces_id=replaces.pk if replaces else None)
    correction = Correction.objects.create(diff=fact_diff(previous, trigger), matched_lots=list(matched_lots),
                                           **values)
    OutboxMessage.objects.create(correction=correction, **message_values(patient, values))
    before, after = drafted_event(values)
    audit.record(AuditEvent.Action.DRAFTED, by=SWEEP_ACTOR, correction=correction, decision=new_decision,
                 sweep_run=run, before=before, after=after)
    return correction


def mark_stale(correction: Correction, *, run=None, note="") -> bool:
    """Stale a draft before it is sent, in the caller's transaction (which also drafts its replacement
    while the patient is still owed a letter: corrections.recall_letters). Returns False when its
    message is already out of our hands."""
    unsent = [OutboxMessage.Status.HELD, OutboxMessage.Status.READY]
    cancelled = transitions.move(OutboxMessage, {"correction": correction}, unsent, OutboxMessage.Status.CANCELLED,
                                 last_error="stale: superseded before sending")
    has_message = OutboxMessage.objects.filter(correction=correction).exists()
    if has_message and not cancelled:
        return False
    before = {"status": correction.status}
    return transitions.move_row(correction, Correction.Status.STALE, event={
        "action": AuditEvent.Action.STALE, "by": SWEEP_ACTOR, "correction": correction, "sweep_run": run,
        "before": before, "after": {"status": Correction.Status.STALE}, "note": note})
