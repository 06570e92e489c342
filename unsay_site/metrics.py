"""Prometheus metrics at /metrics: django-prometheus's request/response metrics for this process,
plus Unsay's own counters and gauges, read from the database at scrape time.

Reading them from the database (one small aggregate query each) instead of incrementing in-process
counters means every gunicorn worker, Celery worker and beat process is counted, whichever process
the scrape lands on, and no code path has to remember to increment. The "counters" are totals of
rows that are never deleted (drafts, re-decisions, decisions, ingest runs), so they only go up;
states that move (awaiting review, unknown outcome) are gauges. No label carries patient data:
labels are kinds, outcomes and statuses only.
"""

from django.db.models import Count, Min, Q, Sum
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ask.models import UsageCounter
from corrections.models import Correction, OutboxMessage, Redecision
from memory.models import Decision
from recalls.models import IngestRun

# (name, help, type, labels): what describe() announces without touching the database.
METRICS = [
    ("unsay_drafts", "Correction and notice drafts written, by kind.", "counter", ["kind"]),
    ("unsay_redecisions", "Re-decisions made by sweeps, by outcome.", "counter", ["outcome"]),
    ("unsay_guardrail_overrides", "Decisions whose reasoner verdict the guardrail overrode.", "counter", []),
    ("unsay_model_calls", "Reasoner model calls counted against the daily cap.", "counter", []),
    ("unsay_outbox_outcomes", "Outbox messages that reached a final outcome, by outcome.", "counter", ["outcome"]),
    ("unsay_ingested_records", "openFDA records read by ingest runs, by kind.", "counter", ["kind"]),
    ("unsay_outbox_messages", "Outbox messages by current status.", "gauge", ["status"]),
    ("unsay_drafts_awaiting_review", "Drafts awaiting a pharmacist's review.", "gauge", []),
    ("unsay_outbox_unknown", "Outbox messages whose outcome is unknown (need a human).", "gauge", []),
    ("unsay_oldest_class1_draft_age_seconds", "Age of the oldest Class I draft awaiting review (0 if none).",
     "gauge", []),
]
FINAL_OUTCOMES = ("sent", "failed", "cancelled")


def _family(name, help_text, kind, labels):
    cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
    return cls(name, help_text, labels=labels)


class UnsayCollector:
    """A prometheus_client collector; registered once per process by unsay_site.apps."""

    def describe(self):
        return [_family(*spec) for spec in METRICS]

    def collect(self):
        families = {spec[0]: _family(*spec) for spec in METRICS}
        for row in Correction.objects.values("kind").annotate(n=Count("id")).order_by("kind"):
            families["unsay_drafts"].add_metric([row["kind"]], row["n"])
        for row in Redecision.objects.values("outcome").annotate(n=Count("id")).order_by("outcome"):
            families["unsay_redecisions"].add_metric([row["outcome"]], row["n"])
        families["unsay_guardrail_overrides"].add_metric(
            [], Decision.objects.exclude(guardrail_override="").count())
        families["unsay_model_calls"].add_metric(
            [], UsageCounter.objects.filter(scope="daily").aggregate(n=Sum("n"))["n"] or 0)
        statuses = dict(OutboxMessage.objects.values_list("status").annotate(n=Count("id")).order_by())
        for outcome in FINAL_OUTCOMES:
            families["unsay_outbox_outcomes"].add_metric([outcome], statuses.get(outcome, 0))
        for status in OutboxMessage.Status.values:
            families["unsay_outbox_messages"].add_metric([status], statuses.get(status, 0))
        families["unsay_outbox_unknown"].add_metric([], statuses.get(OutboxMessage.Status.UNKNOWN, 0))
        for row in IngestRun.objects.values("kind").annotate(n=Sum("fetched")).order_by("kind"):
            families["unsay_ingested_records"].add_metric([row["kind"]], row["n"] or 0)
        drafts = Correction.objects.filter(status=Correction.Status.DRAFT).aggregate(
            n=Count("id"), oldest_class1=Min("created", filter=Q(classification="Class I")))
        families["unsay_drafts_awaiting_review"].add_metric([], drafts["n"])
        oldest = drafts["oldest_class1"]
        families["unsay_oldest_class1_draft_age_seconds"].add_metric(
            [], (timezone.now() - oldest).total_seconds() if oldest else 0.0)
        return list(families.values())


_registered = False


def register_collector():
    """Add UnsayCollector to prometheus_client's default registry (the one django-prometheus's
    exporter serves), once per process."""
    global _registered
    if _registered:
        return
    REGISTRY.register(UnsayCollector())
    _registered = True
