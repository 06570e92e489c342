from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """For rows that only services write (facts, runs, corrections, audit): people read, never edit."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
