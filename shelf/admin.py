"""The shelf in the admin: read-only (units and events are written by receiving, tasks by the worklist), except
the sites people work at, which an operator grants here (StaffSite, ADR 0015)."""

from django.contrib import admin

from core.admin_base import ReadOnlyAdmin

from .models import ReceivedEvent, ShelfEvent, ShelfTask, StaffSite, Unit


@admin.register(Unit)
class UnitAdmin(ReadOnlyAdmin):
    list_display = ("gtin", "serial", "ndc", "lot_printed", "expiry", "site", "state", "received_at")
    list_filter = ("state",)
    search_fields = ("=serial", "=gtin", "=lot", "=ndc")
    raw_id_fields = ("dispensing",)
    show_full_result_count = False  # a million units: no COUNT(*) per page


@admin.register(ReceivedEvent)
class ReceivedEventAdmin(ReadOnlyAdmin):
    list_display = ("event_key", "event_type", "biz_step", "site", "status", "reason", "received_at")
    list_filter = ("status", "event_type", "biz_step")
    search_fields = ("=event_key", "source")
    show_full_result_count = False


@admin.register(ShelfTask)
class ShelfTaskAdmin(ReadOnlyAdmin):
    list_display = ("recall_number", "site", "created", "quarantined_at", "quarantine_count", "returned_at",
                    "return_count", "destroyed_at", "destroy_count")
    search_fields = ("=recall_number", "site")
    list_select_related = ("quarantined_by", "returned_by")


@admin.register(ShelfEvent)
class ShelfEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor_label", "action", "site", "recall_number")
    list_filter = ("action",)
    search_fields = ("=recall_number",)


@admin.register(StaffSite)
class StaffSiteAdmin(admin.ModelAdmin):
    list_display = ("user", "site", "created")
    search_fields = ("user__username", "site")
    autocomplete_fields = ("user",)
    list_select_related = ("user",)
