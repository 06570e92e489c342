"""Pharmacist review actions. Each is one transaction: the state change, its outbox side, and an
audit event naming the user with before/after state. Permissions are checked here as well as in
the views, so no caller (view, admin, command) can skip them."""

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, Min, Q
from django.utils import timezone

from memory.models import Fact
from unsay_site.retry import run_in_transaction

from .models import AuditEvent, Correction, OutboxMessage, Redecision

REVIEW_PERMISSION = "corrections.review_correction"


def can_review(user) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(REVIEW_PERMISSION))


def require_reviewer(user):
    if not can_review(user):
        raise PermissionDenied("Only pharmacists may review corrections.")


class NotReviewable(ValidationError):
    pass


def _snapshot(c: Correction) -> dict:
    return {"status": c.status, "text": c.text, "final_text": c.final_text, "rejection_reason": c.rejection_reason}


def _lock_draft(correction_id: int) -> Correction:
    correction = Correction.objects.select_for_update(of=("self",)).get(pk=correction_id)
    if correction.status != Correction.Status.DRAFT:
        raise NotReviewable(f"This draft is already {correction.get_status_display().lower()}.")
    return correction


def _ensure_current(correction: Correction):
    """A draft whose triggering fact version has been superseded will be staled and replaced by
    the sweep (which compares against what the patient was last told); it must not go out."""
    if correction.trigger_fact_id and Fact.objects.filter(pk=correction.trigger_fact_id,
                                                          retracted_at__isnull=False).exists():
        raise NotReviewable("A newer version of the recall has arrived; this draft will be replaced by the sweep.")


def _enqueue_dispatch():
    from .tasks import dispatch_outbox

    def _send():
        try:
            dispatch_outbox.delay()
        except Exception:  # the periodic dispatch picks it up
            import logging

            logging.getLogger(__name__).exception("could not enqueue dispatch")

    transaction.on_commit(_send)


def approve(correction_id: int, *, user, final_text: str | None = None) -> Correction:
    require_reviewer(user)

    def _approve():
        correction = _lock_draft(correction_id)
        _ensure_current(correction)
        before = _snapshot(correction)
        edited = final_text is not None and final_text.strip() and final_text.strip() != correction.drafted_text.strip()
        correction.final_text = final_text.strip() if edited else ""
        correction.status = Correction.Status.APPROVED
        correction.reviewed_by = user
        correction.reviewed_at = timezone.now()
        correction.save(update_fields=["final_text", "status", "reviewed_by", "reviewed_at", "updated"])
        OutboxMessage.objects.filter(correction=correction, status=OutboxMessage.Status.HELD).update(
            status=OutboxMessage.Status.READY, body=correction.text, next_attempt_at=timezone.now())
        AuditEvent.objects.create(actor=user, actor_label=user.get_username(),
                                  action=AuditEvent.Action.EDITED if edited else AuditEvent.Action.APPROVED,
                                  correction=correction, before=before, after=_snapshot(correction))
        _enqueue_dispatch()
        return correction

    return run_in_transaction(_approve)


def reject(correction_id: int, *, user, reason: str) -> Correction:
    require_reviewer(user)
    reason = (reason or "").strip()
    if not reason:
        raise NotReviewable("A rejection needs a reason.")

    def _reject():
        correction = _lock_draft(correction_id)
        before = _snapshot(correction)
        correction.status = Correction.Status.REJECTED
        correction.rejection_reason = reason
        correction.reviewed_by = user
        correction.reviewed_at = timezone.now()
        correction.save(update_fields=["status", "rejection_reason", "reviewed_by", "reviewed_at", "updated"])
        OutboxMessage.objects.filter(correction=correction).exclude(status=OutboxMessage.Status.SENT).update(
            status=OutboxMessage.Status.CANCELLED, last_error=f"rejected: {reason}"[:2000])
        AuditEvent.objects.create(actor=user, actor_label=user.get_username(), action=AuditEvent.Action.REJECTED,
                                  correction=correction, before=before, after=_snapshot(correction), note=reason)
        return correction

    return run_in_transaction(_reject)


def bulk_approve(recall_number: str, *, user, ids=None) -> list[Correction]:
    """Approve every current draft of one recall (or the listed ones of it). Skips drafts that went
    stale or were reviewed meanwhile; returns what was approved."""
    require_reviewer(user)
    qs = Correction.objects.pending_review().filter(recall_number=recall_number)
    if ids is not None:
        qs = qs.filter(pk__in=list(ids))
    approved = []
    for correction_id in qs.order_by("id").values_list("id", flat=True):
        try:
            approved.append(approve(correction_id, user=user))
        except NotReviewable:
            continue
    return approved


# --- queue and dashboard --------------------------------------------------------------------


@dataclass
class RecallGroup:
    recall_number: str
    classification: str
    severity: int
    drafts: list


def review_queue() -> list[RecallGroup]:
    """Drafts grouped by recall: most severe recall first, then the recall with the oldest draft."""
    drafts = (Correction.objects.pending_review()
              .select_related("patient", "trigger_fact", "previous_fact", "old_decision")
              .defer("trigger_fact__embedding", "previous_fact__embedding")
              .review_order())
    groups: dict[str, RecallGroup] = {}
    for draft in drafts:
        group = groups.get(draft.recall_number)
        if group is None:
            group = groups[draft.recall_number] = RecallGroup(draft.recall_number, draft.classification,
                                                              draft.severity, [])
        group.drafts.append(draft)
    return sorted(groups.values(), key=lambda g: (-g.severity, g.drafts[0].created))


def recall_dashboard() -> list[dict]:
    """Counts per recall: examined, corrected, reaffirmed, notices, approved, sent, rejected,
    undelivered (failed or outcome unknown), and
    for Class I the hours since that Class I version was first believed."""
    rows: dict[str, dict] = {}

    def row(number):
        return rows.setdefault(number, {"recall_number": number, "examined": 0, "corrected": 0, "reaffirmed": 0,
                                        "notices": 0, "pending": 0, "approved": 0, "sent": 0, "rejected": 0,
                                        "stale": 0, "undelivered": 0, "classification": "", "class_i_hours": None})

    for item in Redecision.objects.values("recall_number").annotate(
        examined=Count("id"), corrected=Count("id", filter=Q(outcome=Redecision.Outcome.CORRECTED)),
        reaffirmed=Count("id", filter=Q(outcome=Redecision.Outcome.REAFFIRMED)),
    ):
        r = row(item["recall_number"])
        r.update(examined=item["examined"], corrected=item["corrected"], reaffirmed=item["reaffirmed"])
    S = Correction.Status
    for item in Correction.objects.values("recall_number").annotate(
        notices=Count("id", filter=Q(kind=Correction.Kind.NOTICE) & ~Q(status=S.STALE)),
        pending=Count("id", filter=Q(status=S.DRAFT)),
        approved=Count("id", filter=Q(status__in=[S.APPROVED, S.SENT])),
        sent=Count("id", filter=Q(status=S.SENT)),
        rejected=Count("id", filter=Q(status=S.REJECTED)),
        stale=Count("id", filter=Q(status=S.STALE)),
        classification=Min("classification"),
    ):
        r = row(item["recall_number"])
        r.update({k: item[k] for k in ("notices", "pending", "approved", "sent", "rejected", "stale",
                                       "classification")})
    # Approved but not delivered: the send gave up, or its outcome is unknown. A pharmacist must act.
    M = OutboxMessage.Status
    for item in (OutboxMessage.objects.filter(status__in=[M.FAILED, M.UNKNOWN])
                 .values("correction__recall_number").annotate(n=Count("id"))):
        row(item["correction__recall_number"])["undelivered"] = item["n"]
    now = timezone.now()
    for number, r in rows.items():
        if not number:
            continue
        first_class_i = (Fact.objects.filter(kind=Fact.Kind.RECALL, fact_key__startswith=f"recall:{number}:",
                                             attributes__classification="Class I")
                         .aggregate(first=Min("asserted_at"))["first"])
        if first_class_i:
            r["classification"] = "Class I"
            r["class_i_hours"] = round((now - first_class_i).total_seconds() / 3600, 1)
    return sorted(rows.values(), key=lambda r: (r["classification"] != "Class I", r["recall_number"]))
