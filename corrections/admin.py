"""Admin for everything the review queue doesn't cover: browsing runs and the audit trail (messages: outbox.admin).
Drafts are approved/rejected in the queue (services check permissions and write audit events), so
here they are read-only."""

from django.contrib import admin
from django.utils.html import format_html

from core.admin_base import ReadOnlyAdmin

from .models import AuditEvent, Correction, Redecision, SweepRun


@admin.register(SweepRun)
class SweepRunAdmin(ReadOnlyAdmin):
    list_display = ["started", "trigger", "status", "examined", "reaffirmed", "corrected", "notices",
                    "reasoner_calls", "errors", "finished"]
    list_filter = ["status", "trigger"]


@admin.register(Correction)
class CorrectionAdmin(ReadOnlyAdmin):
    list_display = ["created", "kind", "status", "patient", "match", "recall_number", "classification", "old_verdict",
                    "new_verdict", "reviewed_by", "queue_link"]
    list_filter = ["status", "kind", "match", "classification"]
    search_fields = ["recall_number", "patient__display_name", "patient__external_ref", "dedupe_key"]
    list_select_related = ["patient", "reviewed_by"]
    raw_id_fields = ["patient", "old_decision", "new_decision", "trigger_fact", "previous_fact", "replaces",
                     "sweep_run", "reviewed_by"]

    @admin.display(description="Review")
    def queue_link(self, obj):
        if obj.status != Correction.Status.DRAFT:
            return ""
        return format_html('<a href="/corrections/review/#card-{}">in queue</a>', obj.public_id)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "actor_label", "action", "correction", "note"]
    list_filter = ["action"]
    search_fields = ["actor_label", "note"]
    raw_id_fields = ["actor", "correction", "decision", "sweep_run"]


@admin.register(Redecision)
class RedecisionAdmin(ReadOnlyAdmin):
    list_display = ["created", "outcome", "recall_number", "old_decision", "new_decision", "shared"]
    list_filter = ["outcome"]
    raw_id_fields = ["old_decision", "new_decision", "trigger_fact", "sweep_run"]
