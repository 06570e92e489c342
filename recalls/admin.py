from django.contrib import admin

from core.admin_base import ReadOnlyAdmin

from .models import IngestRun, QuarantinedRecord, RecallRecord, RecallText


class QuarantineInline(admin.TabularInline):
    model = QuarantinedRecord
    fields = ("recall_number", "drug", "reason", "created", "last_seen")
    readonly_fields = fields
    extra = 0
    max_num = 0
    show_change_link = True
    can_delete = False


@admin.register(IngestRun)
class IngestRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "source", "kind", "status", "started", "duration_seconds", "fetched", "new_facts",
                    "new_versions", "retracted", "unchanged", "quarantined", "older_than_believed", "embedding_calls")
    list_filter = ("status", "source", "kind", "trigger")
    search_fields = ("source_ref", "snapshot_location", "error")
    date_hierarchy = "started"
    inlines = [QuarantineInline]


@admin.register(QuarantinedRecord)
class QuarantinedRecordAdmin(ReadOnlyAdmin):
    list_display = ("recall_number", "drug", "reason", "run", "source", "created", "last_seen")
    list_filter = ("run__kind",)
    # Searchable by drug, lot (inside code_info) and recall number.
    search_fields = ("recall_number", "drug", "code_info", "reason", "source")
    list_select_related = ("run",)


@admin.register(RecallRecord)
class RecallRecordAdmin(ReadOnlyAdmin):
    list_display = ("recall_number", "subject", "scope", "updated", "last_run")
    search_fields = ("recall_number", "subject", "lots")


@admin.register(RecallText)
class RecallTextAdmin(ReadOnlyAdmin):
    """The texts a recall fact's attributes.texts names (its digest is searchable)."""

    list_display = ("digest", "firm", "reason", "created")
    search_fields = ("=digest", "firm", "reason", "product_description")
