"""Admin for everything the review queue doesn't cover: browsing runs, messages and the audit trail.
Drafts are approved/rejected in the queue (services check permissions and write audit events), so
here they are read-only."""

from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.utils.html import format_html

from core.admin_base import ReadOnlyAdmin

from . import dispatch
from .models import AuditEvent, Correction, OutboxMessage, Redecision, SweepRun
from .review import can_review


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


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ["created", "channel", "recipient", "status", "attempts", "sent_at", "provider_id", "last_error"]
    list_filter = ["status", "channel"]
    search_fields = ["dedupe_key", "recipient", "provider_id"]
    raw_id_fields = ["correction"]
    actions = ["requeue_selected"]

    def has_requeue_permission(self, request):
        return can_review(request.user)

    @admin.action(description="Requeue selected unknown/failed messages (re-reads the patient's current contact)",
                  permissions=["requeue"])
    def requeue_selected(self, request, queryset):
        """Failed messages are requeued at once. Unknown ones may have been delivered before a crash, so
        the pharmacist first sees them listed and confirms that the provider did not deliver them."""
        unknown = list(queryset.filter(status=OutboxMessage.Status.UNKNOWN).select_related("correction__patient"))
        confirmed = request.POST.get("confirm_not_delivered") == "yes"
        if unknown and not confirmed:
            return TemplateResponse(request, "admin/corrections/outboxmessage/requeue_confirm.html", {
                **self.admin_site.each_context(request), "title": "Confirm: these messages were not delivered",
                "opts": self.model._meta, "unknown": unknown,
                "selected": queryset.values_list("pk", flat=True), "action": "requeue_selected",
                "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME})
        done, refused = 0, []
        for message_id in queryset.values_list("pk", flat=True):
            try:
                dispatch.requeue(message_id, user=request.user, note="requeued from the outbox admin",
                                 confirmed_not_delivered=confirmed)
                done += 1
            except dispatch.NotRequeueable as exc:
                refused.append(f"message {message_id}: {exc}")
        if done:
            self.message_user(request, f"Requeued {done} message{'s' if done != 1 else ''}; the dispatcher sends "
                                       f"them to the patients' current contact details.", messages.SUCCESS)
        for reason in refused:
            self.message_user(request, f"Not requeued: {reason}", messages.WARNING)
        return None


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
