"""Admin for outbox messages: browsing them, and a pharmacist's requeue of unknown or failed ones."""

from django.contrib import admin, messages
from django.template.response import TemplateResponse

from core.admin_base import ReadOnlyAdmin
from corrections.models import OutboxMessage
from corrections.review import can_review

from . import dispatch


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
