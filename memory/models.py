"""Bitemporal, versioned facts and the decisions that read them.

A Fact row is one *version* of one claim. Rows are never updated in place except to close
their belief interval (retracted_at) and point at their successor, to re-derive their scopes, and to
receive their vector once, after the write (memory.vectors): a PostgreSQL trigger refuses any other
change (migration 0017, docs/adr/0017). Valid time
(valid_from/valid_to) says when the claim is true in the world; belief time
(asserted_at/retracted_at) says when we believed it.

Facts and decisions are history, so they are never deleted: on PostgreSQL a trigger refuses any
DELETE of either (migration 0011). That is why no foreign key pointing at them is checked by the
database there (`HISTORY_REFERENCE`): a sweep writes about twenty such references per re-decision, and
their row-by-row checks at COMMIT were its largest server cost (bench/sweep.py). Django's
on_delete still applies in the ORM. CockroachDB keeps those constraints (re-added by name).
"""

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import F, Q
from pgvector.django import VectorField

# Keyword arguments of every ForeignKey/OneToOneField that points at a Fact or a Decision (see above).
HISTORY_REFERENCE = {"db_constraint": False}


class FactQuerySet(models.QuerySet):
    def believed(self):
        return self.filter(retracted_at__isnull=True)

    def retracted(self):
        return self.filter(retracted_at__isnull=False)

    def believed_at(self, at):
        """Versions we believed at instant `at`: asserted at or before it, not yet retracted then."""
        return self.filter(asserted_at__lte=at).filter(Q(retracted_at__isnull=True) | Q(retracted_at__gt=at))


class Fact(models.Model):
    class Kind(models.TextChoices):
        RECALL = "recall", "Recall"
        LABEL = "label", "Label warning"
        NOTE = "note", "Note"

    fact_key = models.CharField(max_length=255, help_text="Stable identity of the claim across versions.")
    version = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    subject = models.CharField(max_length=200, help_text="Normalised drug name.")
    # NULL means drug-level (applies to every lot); exact-match queries rely on that distinction.
    lot = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    statement = models.TextField()
    attributes = models.JSONField(default=dict)
    content_hash = models.CharField(max_length=64)
    source = models.CharField(max_length=64)
    source_ref = models.CharField(max_length=255, blank=True)
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    asserted_at = models.DateTimeField()
    asserted_by = models.CharField(max_length=128, blank=True)
    retracted_at = models.DateTimeField(null=True, blank=True)
    retracted_by = models.CharField(max_length=128, blank=True)
    retraction_reason = models.TextField(blank=True)
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                      **HISTORY_REFERENCE)
    # What this fact can touch (drugs.scopes.fact_scopes, derived from subject, lot and NDC products
    # when the version is written). A new fact sharing a scope with a decision's premise re-decides it.
    scopes = ArrayField(models.CharField(max_length=255), default=list, blank=True)
    # NULL until the embedding stage (memory.vectors) gives the version its vector, after the write
    # committed: a vector is not belief, so a fact is believed and read without one (docs/adr/0017).
    embedding = VectorField(dimensions=settings.UNSAY_EMBEDDING_DIM, null=True, blank=True)

    objects = FactQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fact_key", "version"], name="fact_key_version_unique"),
            models.UniqueConstraint(
                fields=["fact_key"], condition=Q(retracted_at__isnull=True), name="fact_one_believed_per_key"
            ),
            models.CheckConstraint(
                condition=Q(retracted_at__isnull=True) | Q(asserted_at__lte=F("retracted_at")),
                name="fact_asserted_before_retracted",
            ),
            models.CheckConstraint(
                condition=Q(valid_from__isnull=True) | Q(valid_to__isnull=True) | Q(valid_from__lte=F("valid_to")),
                name="fact_valid_interval_ordered",
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="fact_version_positive"),
        ]
        indexes = [
            # Used by retrieve(): exact structured matches over believed facts.
            models.Index(fields=["subject", "lot"], condition=Q(retracted_at__isnull=True),
                         name="fact_believed_subject_lot"),
            models.Index(fields=["lot"], condition=Q(retracted_at__isnull=True), name="fact_believed_lot"),
            # Used by beliefs_at() / replay.
            models.Index(fields=["fact_key", "asserted_at"], name="fact_key_asserted"),
            # Used by the sweep: believed facts that share a scope with a standing decision's premise.
            GinIndex(fields=["scopes"], condition=Q(retracted_at__isnull=True), name="fact_believed_scopes"),
            # Used by the embedding stage (memory.vectors): the backlog, believed versions with no vector yet.
            models.Index(fields=["id"], condition=Q(retracted_at__isnull=True, embedding__isnull=True),
                         name="fact_believed_unembedded"),
        ]

    def __str__(self):
        return f"{self.fact_key} v{self.version}"

    @property
    def is_believed(self) -> bool:
        return self.retracted_at is None


class DecisionQuerySet(models.QuerySet):
    def standing(self):
        return self.filter(status=Decision.Status.STANDING)


class Decision(models.Model):
    class Verdict(models.TextChoices):
        SAFE = "safe", "Safe"
        CAUTION = "caution", "Caution"
        STOP = "stop", "Stop — contact the pharmacy"
        UNKNOWN = "unknown", "Unknown"

    class Status(models.TextChoices):
        STANDING = "standing", "Standing"
        SUPERSEDED = "superseded", "Superseded"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # The patient it was for, by id and without a foreign key: patients sits above memory, so nothing
    # here points up to it (docs/architecture.md, "Layers"). patients.selectors reads the patients of
    # decisions, and patients refuses to delete a patient who has decisions (patients.signals).
    # No index of its own: decision_patient_subject leads with it, and each index is a write per row.
    patient_id = models.BigIntegerField(null=True, blank=True)
    # Copied from the patient for REGIONAL BY ROW homing on CockroachDB; blank when no patient.
    region = models.CharField(max_length=40, blank=True)
    question = models.TextField()
    subject = models.CharField(max_length=200, blank=True)
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    answer = models.TextField()
    reasoner = models.CharField(max_length=100, help_text="Reasoner identity, e.g. rules/1 or bedrock:<model>.")
    # Set when the guardrail raised the reasoner's verdict: what it said and why it was overridden.
    reasoner_verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True)
    guardrail_override = models.TextField(blank=True)
    # Fingerprint of the inputs (question, patient lots, fact versions read); equal inputs => equal decision.
    inputs_hash = models.CharField(max_length=64, blank=True)
    # The fact versions it read (ADR 0016); shared with every decision that read the same. NULL only for a
    # decision written before read sets and not yet moved (migration 0016 moves them all).
    read_set = models.ForeignKey("ReadSet", null=True, blank=True, on_delete=models.PROTECT, related_name="decisions",
                                 **HISTORY_REFERENCE, db_index=False)  # decision_read_set leads with it
    # The scopes it rests on (ADR 0018), shared with every decision that rests on the same. NULL only for a
    # decision written before premise sets and not yet moved (migration 0018 moves them all).
    premise_set = models.ForeignKey("PremiseSet", null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="decisions", **HISTORY_REFERENCE,
                                    db_index=False)  # decision_premise_set leads with it
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.STANDING)
    replaces = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="replaced_by", **HISTORY_REFERENCE)
    decided_at = models.DateTimeField()
    superseded_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = DecisionQuerySet.as_manager()

    class Meta:
        indexes = [
            # Used by the sweep: keyset pages over standing decisions.
            models.Index(fields=["id"], condition=Q(status="standing"), name="decision_standing"),
            # Also serves the ask screen's reuse of an identical answer (ask.services.reusable_decision):
            # a patient has a handful of decisions, so their inputs_hash needs no index of its own.
            models.Index(fields=["patient_id", "subject", "decided_at"], name="decision_patient_subject"),
            # Used by the stale set's retracted_read branch and the preview: a set's decisions, by id.
            models.Index(fields=["read_set", "id"], name="decision_read_set"),
            # Used by the stale set's new_fact branch and exposure's anti-join: a premise set's standing
            # decisions. Partial, so superseding a decision adds no entry here; the set alone (not with the
            # id) so the server deduplicates its few keys: 7.5 MB for a million decisions where (set, id)
            # took 214 MB, and a sweep was faster (docs/benchmarks.md).
            models.Index(fields=["premise_set"], condition=Q(status="standing"), name="decision_premise_set"),
        ]
        # The ask screen's permission (core.roles.ASK_SCREEN): asking records a decision for a patient.
        permissions = [("ask_for_patient", "Can ask whether a patient's medicine is safe (ask screen)")]

    def __str__(self):
        return f"{self.verdict} for {self.patient_id}: {self.question[:40]}"

    @property
    def reads(self):
        """The fact versions this decision read (its read set's members), in rank order."""
        return ReadSetMember.objects.filter(read_set_id=self.read_set_id).order_by("rank")

    @property
    def premises(self):
        """The scopes this decision rests on (its premise set's members), by scope."""
        return PremiseSetMember.objects.filter(premise_set_id=self.premise_set_id).order_by("scope")


class ReadSet(models.Model):
    """The fact versions one or more decisions read, stored once (ADR 0016). Its id is the sha256 of its
    members' canonical content (memory.read_sets.read_set_id), like a git tree: equal id, equal members.
    Never updated or deleted; it holds no patient data, so it is shared between patients."""

    id = models.CharField(primary_key=True, max_length=64)
    size = models.PositiveIntegerField(help_text="Number of members (fact versions read).")

    def __str__(self):
        return f"read set {self.id[:12]} ({self.size} reads)"


class ReadSetMember(models.Model):
    """One fact version shown to the reasoner, at its rank and score, in a read set."""

    read_set = models.ForeignKey(ReadSet, on_delete=models.PROTECT, related_name="members", **HISTORY_REFERENCE,
                                 db_index=False)  # read_set_member_once (read_set, fact) leads with it
    # No index of its own: what queries members by fact (the stale set, the preview) asks for load-bearing
    # ones, which read_set_bearing_fact holds; facts are never deleted, so no delete looks here.
    fact = models.ForeignKey(Fact, on_delete=models.PROTECT, related_name="read_set_members",
                             **HISTORY_REFERENCE, db_index=False)
    fact_key = models.CharField(max_length=255)
    fact_version = models.PositiveIntegerField()
    rank = models.PositiveIntegerField()
    score = models.FloatField()
    load_bearing = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["read_set", "fact"], name="read_set_member_once"),
        ]
        indexes = [
            # Used by the stale set's retracted_read branch and the preview: the sets that lean on a fact.
            models.Index(fields=["fact", "read_set"], condition=Q(load_bearing=True), name="read_set_bearing_fact"),
        ]
        ordering = ["rank"]

    def __str__(self):
        return f"read set {self.read_set_id[:12]} read {self.fact_key} v{self.fact_version}"


class PremiseSet(models.Model):
    """The scopes one or more decisions rest on, stored once (ADR 0018): its verdict rests on there being
    no other believed fact in them, so a fact asserted later in one of them, and not read by a decision
    resting on the set, makes that decision stale (the sweep's stale set, branch "new_fact"). Its id is
    the sha256 of its sorted scopes (memory.premise_sets.premise_set_id). Never updated or deleted; a
    scope names a drug and a lot, never a patient, so a set is shared between patients."""

    id = models.CharField(primary_key=True, max_length=64)
    size = models.PositiveIntegerField(help_text="Number of scopes.")

    def __str__(self):
        return f"premise set {self.id[:12]} ({self.size} scopes)"


class PremiseSetMember(models.Model):
    """One scope (drugs.scopes) of a premise set."""

    premise_set = models.ForeignKey(PremiseSet, on_delete=models.PROTECT, related_name="members",
                                    **HISTORY_REFERENCE, db_index=False)  # premise_set_member_once leads with it
    scope = models.CharField(max_length=255)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["premise_set", "scope"], name="premise_set_member_once")]
        indexes = [
            # Used by the sweep and exposure: which sets a scope a new fact touches is in.
            models.Index(fields=["scope", "premise_set"], name="premise_set_scope"),
        ]

    def __str__(self):
        return f"premise set {self.premise_set_id[:12]} holds {self.scope}"


class DecisionInput(models.Model):
    """One dispensing row the decision used, with the row's fingerprint then. A row edited, deleted
    or added for that patient and drug since makes the decision stale (branch "dispensing_changed")."""

    decision = models.ForeignKey(Decision, on_delete=models.CASCADE, related_name="inputs", **HISTORY_REFERENCE,
                                 db_index=False)  # decision_input_once (decision, dispensing_id) leads with it
    # No FK: the dispensing row may be deleted later, which is exactly what must be noticed.
    dispensing_id = models.BigIntegerField()
    fingerprint = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["decision", "dispensing_id"], name="decision_input_once")]

    def __str__(self):
        return f"decision {self.decision_id} used dispensing {self.dispensing_id}"
