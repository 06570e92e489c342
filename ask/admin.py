"""Admin for the ask API: clients (with their patients and the sites they hold), keys (secret shown once;
revoke action), usage counters. Imported from memory/admin.py."""

from django import forms
from django.contrib import admin, messages

from ask.keys import check_key_scope, check_site_name, issue_key, revoke_keys
from ask.models import ApiClient, ApiKey, ClientPatient, ClientSite, UsageCounter
from core.admin_base import ReadOnlyAdmin


class ClientPatientInline(admin.TabularInline):
    model = ClientPatient
    raw_id_fields = ["patient"]
    extra = 1


class ClientSiteForm(forms.ModelForm):
    class Meta:
        model = ClientSite
        fields = ["site"]

    def clean_site(self):
        site = self.cleaned_data["site"]
        try:
            check_site_name(site)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return site


class ClientSiteInline(admin.TabularInline):
    """The sites where the client's pharmacy keys may receive EPCIS documents and move units."""

    model = ClientSite
    form = ClientSiteForm
    extra = 1


@admin.register(ApiClient)
class ApiClientAdmin(admin.ModelAdmin):
    list_display = ["name", "created"]
    search_fields = ["name", "sites__site"]
    inlines = [ClientPatientInline, ClientSiteInline]


class ApiKeyForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ["client", "kind", "patient", "name", "pharmacist_scope"]

    def clean(self):
        data = super().clean()
        if self.instance.pk is None and data.get("client") and data.get("kind"):
            try:
                check_key_scope(data["client"], data["kind"], data.get("patient"),
                                pharmacist=bool(data.get("pharmacist_scope")))
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = ["prefix", "name", "kind", "pharmacist_scope", "client", "patient", "created", "last_used_at",
                    "revoked_at"]
    list_filter = ["kind", "pharmacist_scope", ("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["client", "patient"]
    search_fields = ["prefix", "name", "client__name", "patient__external_ref"]
    raw_id_fields = ["patient"]
    actions = ["revoke"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["client", "kind", "patient", "name", "pharmacist_scope"]
        return ["client", "kind", "patient", "name", "pharmacist_scope", "prefix", "created", "last_used_at",
                "revoked_at"]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        return ["client", "kind", "patient", "pharmacist_scope", "prefix", "created", "last_used_at", "revoked_at"]

    def save_model(self, request, obj, form, change):
        if change:
            obj.save(update_fields=["name"])
            return
        # The same service as the API and MCP use; the admin then continues with the saved row.
        key, secret = issue_key(obj.client, kind=obj.kind, patient=obj.patient, name=obj.name,
                                pharmacist=obj.pharmacist_scope)
        obj.pk, obj._state.adding = key.pk, False
        obj.refresh_from_db()
        messages.warning(request, f"Copy this API key now, it will not be shown again: {secret}")

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset):
        count = revoke_keys(queryset)
        self.message_user(request, f"Revoked {count} key(s).")

    def has_delete_permission(self, request, obj=None):
        return False  # revoke instead: keeps who-used-what history


@admin.register(UsageCounter)
class UsageCounterAdmin(ReadOnlyAdmin):
    list_display = ["scope", "window_start", "n"]
    list_filter = ["scope"]
    ordering = ["-window_start", "scope"]

