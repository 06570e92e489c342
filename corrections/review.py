"""Pharmacist review actions. Each is one transaction: the state change, its outbox side, and an
audit event naming the user with before/after state. Permissions are checked here as well as in
the views, so no caller (view, admin, command) can skip them."""

from dataclasses import dataclass
from types import SimpleNamespace

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from core import enqueue
from core.retry import run_in_transaction
from core.roles import REVIEW_SCREEN
from drugs.recall_terms import CLASS_SEVERITY
from memory.models import Decision, Fact

from . import audit, transitions
from .drafting import correction_text, notice_text, sms_limit
from .models import AuditEvent, Correction, OutboxMessage, Redecision
from .triggers import DISPATCH_OUTBOX

REVIEW_PERMISSION = REVIEW_SCREEN  # the screen and the action check the same permission


def can_review(user) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(REVIEW_PERMISSION))


def require_reviewer(user):
    if not can_review(user):
        raise PermissionDenied("Only pharmacists may review corrections.")


class NotReviewable(ValidationError):
    """The draft cannot be reviewed as asked because something changed (a colleague reviewed it,
    a newer recall version arrived, the patient's contact changed): HTTP 409."""

    status = 409


class InvalidReview(NotReviewable):
    """What the pharmacist typed cannot be accepted (empty reason, SMS over the limit): HTTP 400."""

    status = 400


class RecipientChanged(NotReviewable):
    """The patient's current contact differs from the one the message was drafted for."""


def recipient_problem(message: OutboxMessage | None, patient) -> str:
    """Why this message must not go to its recorded recipient, or "" when it may."""
    if message is None:
        return "This draft has no outbox message."
    channel, address = patient.contact()
    if not address:
        return (f"The patient's record has no {'phone number' if channel == 'sms' else 'email address'} for "
                f"their preferred channel ({channel}); staff must add one before this can be sent.")
    if (message.channel, message.recipient) != (channel, address):
        return (f"The patient's contact changed after this was drafted: drafted for {message.channel} "
                f"{message.recipient or '(none)'}, the record now says {channel} {address}. Check the change "
                "is genuine, then choose “Send to the current contact”.")
    return ""


def sms_too_long(text: str) -> str:
    if len(text) > sms_limit():
        return f"This SMS is {len(text)} characters; the limit is {sms_limit()}. Shorten it before approving."
    return ""


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
    # By name: outbox.tasks imports the dispatch, which calls this (the periodic dispatch picks up
    # what a broker that is down missed).
    enqueue.send_on_commit(DISPATCH_OUTBOX)


def approve(correction_id: int, *, user, final_text: str | None = None) -> Correction:
    require_reviewer(user)

    def _approve():
        correction = _lock_draft(correction_id)
        _ensure_current(correction)
        message = OutboxMessage.objects.select_for_update().filter(correction=correction).first()
        # Re-checked under the lock: the address shown on the card must be the one it goes to.
        problem = recipient_problem(message, correction.patient)
        if problem:
            raise RecipientChanged(problem)
        before = _snapshot(correction)
        edited = final_text is not None and final_text.strip() and final_text.strip() != correction.drafted_text.strip()
        if final_text is not None and not final_text.strip():
            raise InvalidReview("The message cannot be empty.")
        text = final_text.strip() if edited else correction.drafted_text
        if message.channel == "sms" and sms_too_long(text):
            raise InvalidReview(sms_too_long(text))
        transitions.move_row(correction, Correction.Status.APPROVED, final_text=final_text.strip() if edited else "",
                             reviewed_by=user, reviewed_at=timezone.now())
        transitions.move(OutboxMessage, {"correction": correction}, OutboxMessage.Status.HELD,
                         OutboxMessage.Status.READY, body=correction.text, next_attempt_at=timezone.now())
        audit.record(AuditEvent.Action.EDITED if edited else AuditEvent.Action.APPROVED, by=user,
                     correction=correction, before=before, after=_snapshot(correction))
        _enqueue_dispatch()
        return correction

    return run_in_transaction(_approve)


def reject(correction_id: int, *, user, reason: str) -> Correction:
    require_reviewer(user)
    reason = (reason or "").strip()
    if not reason:
        raise InvalidReview("A rejection needs a reason.")

    def _reject():
        correction = _lock_draft(correction_id)
        before = _snapshot(correction)
        transitions.move_row(correction, Correction.Status.REJECTED, rejection_reason=reason, reviewed_by=user,
                             reviewed_at=timezone.now())
        transitions.move(OutboxMessage, {"correction": correction},
                         transitions.sources(OutboxMessage, OutboxMessage.Status.CANCELLED),
                         OutboxMessage.Status.CANCELLED, last_error=f"rejected: {reason}"[:2000])
        audit.record(AuditEvent.Action.REJECTED, by=user, correction=correction, before=before,
                     after=_snapshot(correction), note=reason)
        return correction

    return run_in_transaction(_reject)


def use_current_contact(correction_id: int, *, user) -> Correction:
    """Point a draft's message at the patient's current contact (after staff changed it), redrafting
    the text when the channel changed; audited. The draft stays a draft for review."""
    require_reviewer(user)

    def _use():
        correction = _lock_draft(correction_id)
        message = OutboxMessage.objects.select_for_update().get(correction=correction)
        channel, address = correction.patient.contact()
        if not address:
            raise InvalidReview(recipient_problem(message, correction.patient))
        before = {"channel": message.channel, "recipient": message.recipient, "text": correction.text}
        if channel != message.channel:
            correction.drafted_text = redraft(correction, channel=channel)
            correction.final_text = ""
            correction.save(update_fields=["drafted_text", "final_text", "updated"])
        message.channel, message.recipient, message.body = channel, address, correction.text
        message.save(update_fields=["channel", "recipient", "body"])
        audit.record(AuditEvent.Action.RECIPIENT, by=user, correction=correction, before=before,
                     after={"channel": channel, "recipient": address, "text": correction.text})
        return correction

    return run_in_transaction(_use)


def redraft(correction: Correction, *, channel: str) -> str:
    """The letter for this draft on another channel, from the same verdicts and fact versions."""
    fact = correction.trigger_fact or correction.previous_fact
    # The medicine as the draft named it: the decision's subject (what was dispensed), else the recall's.
    decided = correction.new_decision.subject if correction.new_decision_id else ""
    outcome = SimpleNamespace(verdict=correction.new_verdict, subject=decided or (fact.subject if fact else ""))
    if correction.kind == Correction.Kind.NOTICE:
        entries = [entry for entry in correction.matched_lots or () if isinstance(entry, dict)]
        return notice_text(correction.patient, correction.match, outcome, correction.trigger_fact, channel=channel,
                           match_class=correction.match_class, lots=[entry.get("lot") for entry in entries],
                           rule=entries[0].get("rule", "") if entries else "")
    return correction_text(correction.patient, correction.old_verdict, outcome,
                           correction.trigger_fact or correction.previous_fact, correction.previous_fact,
                           channel=channel, match_class=correction.match_class,
                           dispensing_changed=dispensing_changed(correction))


def dispensing_changed(correction: Correction) -> bool:
    """A correction no fact change caused: its fact was already believed when the patient was told, and
    no earlier version is named. What changed was our record of their medicine."""
    told, fact = correction.old_decision, correction.trigger_fact
    return (correction.previous_fact_id is None and fact is not None and told is not None
            and fact.asserted_at <= told.decided_at)


@dataclass
class BulkResult:
    approved: list
    skipped: list  # [(correction id, patient name, why)]: each one named, never a silent count


def bulk_approve(recall_number: str, *, user, ids=None) -> BulkResult:
    """Approve every current draft of one recall (or the listed ones of it). A draft that went stale,
    was reviewed meanwhile or whose recipient changed is skipped, and the result says which and why."""
    require_reviewer(user)
    qs = Correction.objects.pending_review().filter(recall_number=recall_number)
    if ids is not None:
        qs = qs.filter(pk__in=list(ids))
    result = BulkResult([], [])
    for correction_id, name in qs.order_by("id").values_list("id", "patient__display_name"):
        try:
            result.approved.append(approve(correction_id, user=user))
        except NotReviewable as exc:
            result.skipped.append((correction_id, name, exc.message))
    return result


def with_recipient_problems(cards):
    """Each card with `recipient_problem` set (recipient_problem), so the queue warns before approve is
    tried; reads only the patient and message columns the card query already loaded."""
    for card in cards:
        try:
            message = card.message
        except OutboxMessage.DoesNotExist:
            message = None
        card.recipient_problem = recipient_problem(message, card.patient)
    return cards


# --- queue and dashboard --------------------------------------------------------------------


SEVERITY_CLASS = {rank: name for name, rank in CLASS_SEVERITY.items()}  # drugs.recall_terms' ranks, read back
# What a card renders, and nothing else: the queue's size stays proportional to the cards shown.
CARD_FIELDS = [
    "public_id", "kind", "status", "match", "match_class", "recall_number", "classification", "severity", "old_verdict",
    "new_verdict", "old_answer", "diff", "drafted_text", "final_text", "created", "rejection_reason",
    "patient__display_name", "patient__external_ref", "patient__preferred_channel", "patient__preferred_language",
    "patient__email", "patient__phone", "old_decision__question", "old_decision__decided_at", "trigger_fact__fact_key",
    "trigger_fact__version", "trigger_fact__statement", "previous_fact__fact_key", "previous_fact__version",
    "previous_fact__statement", "message__channel", "message__recipient", "message__status",
    "reviewed_by__username",
]


# What a card says about how sure the match is (drugs.matching.MatchClass). Rows drafted before the
# sweep recorded a class fall back on `match`: a lot match is probable, a drug-only match a candidate.
LEGACY_CARD_CLASS = {"lot": "probable", "drug": "candidate"}


def card_match_class(correction) -> str:
    """'confirmed' / 'probable' / 'product_all_lots' / 'candidate', or "" (an answer the patient asked for)."""
    return correction.match_class or LEGACY_CARD_CLASS.get(correction.match, "")


def card_queryset():
    # Patient and message joined; the few fact versions, decisions and reviewers a page shows are
    # prefetched (one small query each), which keeps the page query's plan cheap to make.
    return (Correction.objects.select_related("patient", "message")
            .only(*[f for f in CARD_FIELDS if f.split("__")[0] not in PREFETCHED], *PREFETCHED)
            .prefetch_related(
                models.Prefetch("trigger_fact", Fact.objects.only("fact_key", "version", "statement")),
                models.Prefetch("previous_fact", Fact.objects.only("fact_key", "version", "statement")),
                models.Prefetch("old_decision", Decision.objects.only("question", "decided_at")),
                "reviewed_by"))


PREFETCHED = ["trigger_fact", "previous_fact", "old_decision", "reviewed_by"]


@dataclass
class RecallGroup:
    recall_number: str
    severity: int
    total: int
    first_created: object
    drafts: list
    more_after: int | None = None  # id of the last card shown when more remain

    @property
    def classification(self) -> str:
        return SEVERITY_CLASS.get(self.severity, "")


def group_drafts(recall_number: str, *, after_id: int | None = None, limit: int | None = None):
    """One page of a recall's drafts in queue order (-severity, created, id), keyset after a card,
    on the correction_queue_order index; returns (cards, id to continue after or None)."""
    limit = limit or settings.UNSAY_QUEUE_PAGE
    qs = card_queryset().filter(status=Correction.Status.DRAFT, recall_number=recall_number)
    if after_id:
        last = Correction.objects.filter(pk=after_id).values("severity", "created").first()
        if last:
            qs = qs.filter(Q(severity__lt=last["severity"])
                           | Q(severity=last["severity"], created__gt=last["created"])
                           | Q(severity=last["severity"], created=last["created"], id__gt=after_id))
    cards = list(qs.review_order()[: limit + 1])
    more = cards[limit - 1].id if len(cards) > limit else None
    return with_recipient_problems(cards[:limit]), more


def review_queue(*, per_group: int | None = None) -> list[RecallGroup]:
    """Drafts grouped by recall, most severe recall first, then the recall with the oldest draft:
    counts from one GROUP BY, then the first page of cards per recall."""
    groups = [
        RecallGroup(row["recall_number"], row["severity"], row["total"], row["first"], [])
        for row in (Correction.objects.pending_review().values("recall_number")
                    .annotate(total=Count("id"), severity=Max("severity"), first=Min("created"))
                    .order_by("-severity", "first", "recall_number"))
    ]
    for group in groups:
        group.drafts, group.more_after = group_drafts(group.recall_number, limit=per_group)
    return groups


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
