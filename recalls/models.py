"""Ingestion bookkeeping. The recall and label facts themselves live in memory.Fact."""

from django.db import models

from core.runlock import RunStatus


class IngestRun(models.Model):
    class Source(models.TextChoices):
        FILE = "file", "File"
        API = "api", "openFDA API"

    class Kind(models.TextChoices):
        ENFORCEMENT = "enforcement", "Drug enforcement (recalls)"
        LABEL = "label", "Drug labels"

    Status = RunStatus  # the same vocabulary as a sweep run (core.runlock)

    source = models.CharField(max_length=8, choices=Source.choices)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.ENFORCEMENT)
    source_ref = models.CharField(max_length=500, blank=True, help_text="File path or API query.")
    # Incremental API runs: the report_date window fetched (inclusive).
    since = models.DateField(null=True, blank=True)
    until = models.DateField(null=True, blank=True)
    trigger = models.CharField(max_length=20, default="command", help_text="command, celery, test…")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    started = models.DateTimeField()
    # Written at start and after every chunk: a run still "running" whose heartbeat stopped was killed.
    heartbeat = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0, help_text="Records in the source, when known up front.")
    fetched = models.PositiveIntegerField(default=0, help_text="Records read so far.")
    new_facts = models.PositiveIntegerField(default=0)
    new_versions = models.PositiveIntegerField(default=0)
    retracted = models.PositiveIntegerField(default=0, help_text="Facts retracted with no successor (lots dropped).")
    unchanged = models.PositiveIntegerField(default=0, help_text="Records that changed nothing.")
    quarantined = models.PositiveIntegerField(default=0)
    older_than_believed = models.PositiveIntegerField(
        default=0, help_text="Changed records skipped because we already believe a newer snapshot or report of them.")
    embedding_calls = models.PositiveIntegerField(default=0)
    embedding_provider = models.CharField(max_length=100, blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)
    snapshot_location = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started", "-id"]
        indexes = [
            # Used by the incremental schedule: the last successful API run.
            models.Index(fields=["source", "kind", "status", "-started"], name="ingestrun_last_success"),
        ]

    def __str__(self):
        return f"{self.get_source_display()} {self.kind} run {self.pk} ({self.status})"

    @property
    def rate(self) -> float | None:
        if self.duration_seconds:
            return self.fetched / self.duration_seconds
        return None


class QuarantinedRecord(models.Model):
    """A source record we could not turn into facts; kept verbatim with the reason, once per record and
    source (recalls.quarantine): ingesting the same file again finds the row and notes the run."""

    # The last run that met the record (its first sighting is `created`).
    run = models.ForeignKey(IngestRun, on_delete=models.CASCADE, related_name="quarantine")
    recall_number = models.CharField(max_length=40, blank=True)
    drug = models.CharField(max_length=300, blank=True)
    code_info = models.TextField(blank=True)
    reason = models.TextField()
    raw = models.JSONField()
    # The file or snapshot the record came from (the run's snapshot location, else its source).
    source = models.CharField(max_length=500, blank=True)
    # SHA-256 of the record as kept (`raw`, keys sorted): the same record in the same source is one row.
    record_digest = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "record_digest"], name="quarantine_once_per_record_and_source"),
        ]

    def __str__(self):
        return f"{self.recall_number or '(no recall number)'}: {self.reason[:60]}"


class RecallRecord(models.Model):
    """What we last ingested for one recall number: the hash of the fields that feed its facts, and the
    openFDA-derived subject/NDCs fixed at first sight (openFDA re-harmonises its `openfda` block often
    without the recall changing; that must not re-key or re-version facts)."""

    recall_number = models.CharField(max_length=40, unique=True)
    record_hash = models.CharField(max_length=64)
    subject = models.CharField(max_length=200, blank=True)
    ndcs = models.JSONField(default=list)
    # identity_source / identity_text / identity_flag, fixed with subject and ndcs
    # (recalls.record_identity.identity_of).
    identity = models.JSONField(default=dict, blank=True)
    # recalls.record_identity.IDENTITY_VERSION the subject was derived with; an older one is re-derived once.
    identity_version = models.PositiveSmallIntegerField(default=1)
    lots = models.JSONField(default=list)
    scope = models.CharField(max_length=8)
    # The ordering guard: what the believed version came from, so an older snapshot never supersedes it.
    report_date = models.DateField(null=True, blank=True)
    snapshot_updated = models.DateField(null=True, blank=True, help_text="meta.last_updated of its snapshot.")
    last_run = models.ForeignKey(IngestRun, null=True, on_delete=models.SET_NULL, related_name="+")
    updated = models.DateTimeField(auto_now=True)

    def __str__(self):
        return self.recall_number


# A record's long texts (attribute names): stored once per distinct version in RecallText, and referred
# to from every fact of the record by TEXTS_REFERENCE (its digest) instead of being copied into each
# (616 lots of D-0644-2020 carried them 616 times). Facts written before that carry them inline;
# recalls.selectors reads both.
TEXT_ATTRIBUTES = ("reason", "firm", "product_description", "distribution", "code_info")
TEXTS_REFERENCE = "texts"


class RecallText(models.Model):
    """A recall record's long texts, stored once per distinct version of them: every lot fact of the
    record refers to this row by `digest` (attributes["texts"]) instead of carrying the texts itself
    (D-0644-2020 has 616 lots). Content-addressed (sha256 of the texts, recalls.ingest.texts_digest) and
    never updated: a record whose texts change gets a new row, and the facts of the old version keep
    pointing at the old one, so history reads the words believed then. Written by recalls.services in
    the transaction of the facts that refer to it; read through recalls.selectors."""

    digest = models.CharField(max_length=64, primary_key=True)
    reason = models.TextField(blank=True)
    firm = models.TextField(blank=True)
    product_description = models.TextField(blank=True)
    distribution = models.TextField(blank=True)
    code_info = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.digest[:12]}: {self.reason[:60]}"
