"""A patient's personal data in corrections, outbox messages and audit events, erased on request
(privacy.services.erase_patient runs this in its transaction).

Pending work for the patient is ended first, so nothing erased can still be sent: drafts are rejected,
approved corrections not yet sent are staled, and their outbox messages cancelled (each transition
checked against corrections.transitions). Then letter texts, answers, recipients and message bodies
are replaced by ERASED, and so are a rejection's reason (a pharmacist may have named the patient in it)
and a message's last sending error (it may quote the recipient); the audit events of the patient's
corrections lose their before/after and note (marked `redacted`: their content hash stays as written,
so the audit chain still verifies, and the erasure's own audit event names them). Statuses, verdicts,
recall numbers, match classes and times stay: the recall report still counts who was notified."""

from django.db.models import Q

from . import transitions
from .models import AuditEvent, Correction, OutboxMessage

ERASED = "[erased on request]"
ERASURE_REJECTION = "personal data erased on request"


def end_pending_work(patient_id: int) -> dict[str, int]:
    C, M = Correction.Status, OutboxMessage.Status
    # Not one whose message a dispatcher holds or has sent: that letter is out of our hands.
    unheld = Q(patient_id=patient_id) & ~Q(message__status__in=[M.SENDING, M.SENT])
    counts = {}
    for old, new in ((C.DRAFT, C.REJECTED), (C.APPROVED, C.STALE)):
        counts[f"corrections {old} -> {new}"] = transitions.move(
            Correction, unheld, old, new,
            rejection_reason=ERASURE_REJECTION if new == C.REJECTED else "")
    counts["outbox messages cancelled"] = transitions.move(
        OutboxMessage, {"correction__patient_id": patient_id}, [M.HELD, M.READY, M.FAILED, M.UNKNOWN], M.CANCELLED)
    return counts


def redact(patient_id: int) -> tuple[dict[str, int], list[int]]:
    """(rows changed per kind, ids of the audit events redacted)."""
    counts = {
        "corrections": Correction.objects.filter(patient_id=patient_id).update(
            old_answer=ERASED, new_answer=ERASED, drafted_text=ERASED, final_text=""),
        "outbox messages": OutboxMessage.objects.filter(correction__patient_id=patient_id).update(
            recipient="", subject=ERASED, body=ERASED, last_error=""),
    }
    # Counted with the corrections above: the same rows, one more column (the erasure's own rejection
    # reason, written by end_pending_work, names no one and stays).
    (Correction.objects.filter(patient_id=patient_id).exclude(rejection_reason__in=["", ERASURE_REJECTION])
     .update(rejection_reason=ERASED))
    events = AuditEvent.objects.filter(correction__patient_id=patient_id, redacted=False)
    ids = sorted(events.values_list("id", flat=True))
    counts["audit events"] = AuditEvent.objects.filter(id__in=ids).update(before={}, after={}, note="",
                                                                          redacted=True)
    return counts, ids
