"""Sweeps, the corrections and notices they draft, the outbox that sends them, and the audit trail.

Nothing here is a "needs re-check" flag: the stale set is a query over memory (standing decisions
whose load-bearing read is a retracted fact version). These tables record what a sweep *did*.
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.audit_chain import ChainedEvent
from core.runlock import RunStatus
from drugs.recall_terms import CLASS_SEVERITY  # noqa: E402,F401 (one home: drugs.recall_terms)
from memory.models import HISTORY_REFERENCE, Decision


class SweepRun(models.Model):
    class Trigger(models.TextChoices):
        SUPERSESSION = "supersession", "After a fact supersession"
        NEW_FACT = "new_fact", "After new facts"
        DISPENSING = "dispensing", "After a dispensing change"
        BEAT = "beat", "Periodic (beat)"
        MANUAL = "manual", "manage.py sweep"

    Status = RunStatus  # the same vocabulary as an ingestion run (core.runlock)

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    # Retracted fact versions this run was asked to sweep; empty = every retracted load-bearing read.
    fact_ids = models.JSONField(default=list, blank=True)
    # Patients whose dispensing changed (a dispensing-triggered sweep); empty for fact-triggered ones.
    patient_ids = models.JSONField(default=list, blank=True)
    examined = models.PositiveIntegerField(default=0)
    reaffirmed = models.PositiveIntegerField(default=0)
    corrected = models.PositiveIntegerField(default=0)
    notices = models.PositiveIntegerField(default=0)
    already_handled = models.PositiveIntegerField(default=0)
    reasoner_calls = models.PositiveIntegerField(default=0)
    pages = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    error_text = models.TextField(blank=True)
    # Keyset cursor: the last decision id this run has committed past.
    last_decision_id = models.BigIntegerField(default=0)
    started = models.DateTimeField(auto_now_add=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started"]
        indexes = [
            # Used by the operations page: running sweeps.
            models.Index(fields=["started"], condition=Q(status="running"), name="sweeprun_running"),
        ]

    def __str__(self):
        return f"sweep {self.trigger} {self.started:%Y-%m-%d %H:%M:%S} ({self.status})"

    @property
    def duration(self):
        if self.finished:
            return self.finished - self.started
        return None


class SweepRange(models.Model):
    """One key range of a sweep's stale set (decision ids, in id order), claimed by one sweep at a time.

    The sweep that reads the stale set (`run`, the plan) cuts it into ranges; every sweep of the same
    scope, on any machine, claims them with a conditional UPDATE (corrections.sweep.claims): a range is
    free while no one holds it, its holder's lease ran out, or its holder's run is no longer running
    (found dead through core.runlock). A range is done once its pages have committed."""

    run = models.ForeignKey(SweepRun, on_delete=models.CASCADE, related_name="ranges")
    first_id = models.BigIntegerField()
    last_id = models.BigIntegerField()
    # The range's slice of the stale set as the plan read it; each page locks and re-checks its ids.
    decision_ids = models.JSONField(default=list)
    claimed_by = models.ForeignKey(SweepRun, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="claimed_ranges")
    lease_until = models.DateTimeField(null=True, blank=True)
    claims = models.PositiveIntegerField(default=0)  # more than one: taken over from a holder gone
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "first_id"]
        indexes = [
            # Used by every claim: the unfinished ranges of a plan.
            models.Index(fields=["run", "first_id"], condition=Q(done_at__isnull=True), name="sweeprange_open"),
        ]

    def __str__(self):
        return f"sweep {self.run_id} decisions {self.first_id}-{self.last_id}"


class CorrectionQuerySet(models.QuerySet):
    def pending_review(self):
        return self.filter(status=Correction.Status.DRAFT)

    def review_order(self):
        """Most severe recall first, then the oldest draft."""
        return self.order_by("-severity", "created", "id")


class Correction(models.Model):
    """A drafted message to one patient: a correction of an answer they were given, or a
    proactive notice to someone exposed through their dispensing whom no correction tells (one
    reviewed letter per patient and recall: corrections.recall_letters)."""

    class Kind(models.TextChoices):
        CORRECTION = "correction", "Correction"
        NOTICE = "notice", "Proactive notice"

    class Status(models.TextChoices):
        DRAFT = "draft", "Awaiting review"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        STALE = "stale", "Stale (superseded before sending)"
        SENT = "sent", "Sent"

    class Match(models.TextChoices):
        ASKED = "asked", "Asked (answer on record)"
        LOT = "lot", "Matched by lot"
        DRUG = "drug", "Matched by drug only (recall names no lot)"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    patient = models.ForeignKey("patients.Patient", on_delete=models.PROTECT, related_name="corrections")
    # Copied from the patient: homes the row with its patient (REGIONAL BY ROW on CockroachDB).
    region = models.CharField(max_length=40, blank=True, editable=False)
    match = models.CharField(max_length=8, choices=Match.choices)
    # How sure the match is (drugs.matching.MatchClass: confirmed, probable, product_all_lots,
    # candidate); a candidate is for the pharmacist to check, never told as if confirmed.
    match_class = models.CharField(max_length=20, blank=True)
    recall_number = models.CharField(max_length=40, blank=True)
    classification = models.CharField(max_length=20, blank=True)
    severity = models.PositiveSmallIntegerField(default=0, help_text="3 = Class I ... 0 = no recall class.")
    # The answer the patient was last given (empty for a notice) and the one we would give now.
    old_decision = models.ForeignKey("memory.Decision", null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="+", **HISTORY_REFERENCE)
    new_decision = models.ForeignKey("memory.Decision", null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="+", **HISTORY_REFERENCE)
    old_verdict = models.CharField(max_length=10, blank=True)
    old_answer = models.TextField(blank=True)
    new_verdict = models.CharField(max_length=10)
    new_answer = models.TextField()
    # The fact version that triggered this draft and the version it replaced.
    trigger_fact = models.ForeignKey("memory.Fact", null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="+", db_index=False,  # indexed once, by correction_trigger_fact
                                     **HISTORY_REFERENCE)
    previous_fact = models.ForeignKey("memory.Fact", null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="+", **HISTORY_REFERENCE)
    diff = models.JSONField(default=list, blank=True, help_text="[{field, before, after}] of the fact change.")
    # A notice's packs and every fact of the recall they may be from, strongest first: one pack that
    # may match several lots of one recall (a lot typed without the recall's "-1" is a near miss of
    # both "-1" and "-2") gets one notice, whose words name the strongest (trigger_fact) and whose
    # row names them all. Empty for a correction: its re-decision answers for the whole medicine.
    matched_lots = models.JSONField(default=list, blank=True, help_text=(
        "[{fact, fact_key, lot, match_class, rule, dispensing}] per recall fact the patient's packs may match."))
    drafted_text = models.TextField()
    final_text = models.TextField(blank=True)
    dedupe_key = models.CharField(max_length=64)  # unique: correction_dedupe_key (Meta.constraints)
    sweep_run = models.ForeignKey(SweepRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="drafts")
    replaces = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="replaced_by")
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="+")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    rejection_reason = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = CorrectionQuerySet.as_manager()

    class Meta:
        permissions = [("review_correction", "Can approve, edit or reject drafted corrections")]
        indexes = [
            # The review queue and its pages: its exact ORDER BY (-severity, created, id) per recall, so a
            # page of cards is an index range scan, never a sort of every draft. (It replaced
            # correction_queue, the same without id: one index fewer to write per draft.)
            models.Index(fields=["recall_number", "-severity", "created", "id"], condition=Q(status="draft"),
                         name="correction_queue_order"),
            models.Index(fields=["trigger_fact"], name="correction_trigger_fact"),
        ]
        # A constraint, not unique=True, which on PostgreSQL also builds a varchar_pattern_ops index for
        # LIKE 'prefix%': no query here filters dedupe keys by prefix, and a sweep writes a draft per
        # affected patient (about 1 s of 37 at 100,000 drafts, bench/recall_to_queue.py).
        constraints = [models.UniqueConstraint(fields=["dedupe_key"], name="correction_dedupe_key")]

    def __str__(self):
        return f"{self.get_kind_display()} for {self.patient_id}: {self.old_verdict or '-'} -> {self.new_verdict}"

    @property
    def old_verdict_label(self) -> str:
        return _verdict_label(self.old_verdict)

    @property
    def new_verdict_label(self) -> str:
        return _verdict_label(self.new_verdict)


    @property
    def text(self) -> str:
        return self.final_text or self.drafted_text

    @property
    def was_edited(self) -> bool:
        return bool(self.final_text) and self.final_text != self.drafted_text


def _verdict_label(verdict: str) -> str:
    """'stop' -> 'Stop — contact the pharmacy': what the verdict means, as Ask shows it."""
    return Decision.Verdict(verdict).label if verdict in Decision.Verdict.values else verdict


class OutboxMessage(models.Model):
    class Status(models.TextChoices):
        HELD = "held", "Held for review"
        READY = "ready", "Ready to send"
        SENDING = "sending", "Claimed by a dispatcher"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed (gave up)"
        CANCELLED = "cancelled", "Cancelled (rejected or stale)"
        UNKNOWN = "unknown", "Outcome unknown: needs a human"

    correction = models.OneToOneField(Correction, on_delete=models.PROTECT, related_name="message")
    region = models.CharField(max_length=40, blank=True, editable=False)  # the patient's, as on Correction
    channel = models.CharField(max_length=8)
    recipient = models.CharField(max_length=254)
    subject = models.CharField(max_length=200)
    body = models.TextField()
    # Same as the correction's; also the email Message-ID so a provider can drop a duplicate. Unique:
    # outbox_dedupe_key (Meta.constraints).
    dedupe_key = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.HELD)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=100, blank=True)
    provider_id = models.CharField(max_length=200, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # Used by the dispatcher's claim query.
            models.Index(fields=["next_attempt_at", "id"], condition=Q(status="ready"), name="outbox_ready"),
        ]
        constraints = [models.UniqueConstraint(fields=["dedupe_key"], name="outbox_dedupe_key")]  # see Correction

    def __str__(self):
        return f"{self.channel} to {self.recipient} ({self.status})"

    @property
    def message_id(self) -> str:
        return f"<{self.dedupe_key}@unsay.local>"


class AuditEvent(ChainedEvent):
    """A correction's, an outbox message's or an erasure's audited step: a link of the one audit chain
    (core.audit_chain). An erasure blanks before/after/note of the patient's events (`redacted`)."""

    CHAIN_STRUCTURE = ("at", "actor_id", "actor_label", "action", "correction_id", "decision_id", "sweep_run_id")
    CHAIN_REDACTABLE = ("before", "after", "note")

    class Action(models.TextChoices):
        DRAFTED = "drafted", "Drafted by sweep"
        REAFFIRMED = "reaffirmed", "Reaffirmed by sweep"
        STALE = "stale", "Marked stale"
        APPROVED = "approved", "Approved"
        EDITED = "edited", "Edited and approved"
        REJECTED = "rejected", "Rejected"
        SENT = "sent", "Sent"
        SEND_FAILED = "send_failed", "Send failed"
        SEND_UNKNOWN = "send_unknown", "Send outcome unknown"
        RECIPIENT = "recipient", "Recipient re-resolved to the patient's current contact"
        REQUEUED = "requeued", "Requeued by a pharmacist"
        CANCELLED = "cancelled", "Cancelled before sending (its correction was no longer approved)"
        ERASED = "erased", "A patient's personal data erased on request"
        ERASED_KEY_REFUSED = "key_refused", "An erased patient's API key refused"
        SEALED = "sealed", "Events left outside the audit chain sealed by an operator"

    # Set by corrections.audit before the row is written, so the content hash covers the stored value.
    at = models.DateTimeField(default=timezone.now)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+")
    actor_label = models.CharField(max_length=150, help_text="Username, or the process (sweep, dispatcher).")
    action = models.CharField(max_length=16, choices=Action.choices)
    correction = models.ForeignKey(Correction, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="audit_events")
    decision = models.ForeignKey("memory.Decision", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                 **HISTORY_REFERENCE)
    sweep_run = models.ForeignKey(SweepRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    class Meta:
        ordering = ["at", "id"]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_label} {self.action}"

    def chain_redactions(self) -> dict[str, list[int]]:
        if self.action != self.Action.ERASED:
            return {}
        named = {table: list(ids) for table, ids in ((self.after or {}).get("redacted") or {}).items()}
        # Erasures recorded before every audited table joined the chain named audit events only.
        named.setdefault(self._meta.db_table, []).extend((self.after or {}).get("redacted_events") or [])
        return named


class Redecision(models.Model):
    """One examined stale decision and what the sweep made of it. Unique per old decision, so a
    replayed sweep cannot count or write the same re-decision twice."""

    class Outcome(models.TextChoices):
        REAFFIRMED = "reaffirmed", "Reaffirmed (verdict unchanged, not messaged)"
        CORRECTED = "corrected", "Corrected (draft written)"

    old_decision = models.OneToOneField("memory.Decision", on_delete=models.PROTECT, related_name="+",
                                        **HISTORY_REFERENCE)
    new_decision = models.OneToOneField("memory.Decision", on_delete=models.PROTECT, related_name="+",
                                        **HISTORY_REFERENCE)
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    recall_number = models.CharField(max_length=40, blank=True)
    trigger_fact = models.ForeignKey("memory.Fact", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                     **HISTORY_REFERENCE)
    sweep_run = models.ForeignKey(SweepRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    shared = models.BooleanField(default=False, help_text="Reused another decision's reasoner result (same inputs).")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["recall_number", "outcome"], name="redecision_recall")]

    def __str__(self):
        return f"{self.outcome}: decision {self.old_decision_id} -> {self.new_decision_id}"
