from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path

from drugs.identity import identity_key
from drugs.lot_field import read_lot_field
from drugs.lots import canonical_lot
from drugs.ndc import normalize_ndc
from patients.csvfile import MAX_IMPORT_BYTES, MAX_ROWS
from patients.csvimport import import_dispensing_csv
from patients.deletion import protected_descriptions
from patients.dispensing import delete_dispensing, save_dispensing
from patients.forms import DispensingImportForm, DispensingRecordForm, PatientForm, PatientImportForm
from patients.models import READ_WITH_DOUBT, DispensingRecord, Patient
from patients.patient_import import import_patients_csv
from patients.services import recall_warning

DISPENSING_FIELDS = ["scan", "drug", "product_description", "ndc", "lot", "lot_unknown", "expiry", "serial",
                     "quantity", "dispensed_at", "site"]


def actor_of(request) -> str:
    return request.user.get_username()


@admin.display(description="lot", ordering="lot")
def lot_column(record):
    return "unknown (not recorded)" if record.lot_unknown else record.lot


class DispensingInline(admin.TabularInline):
    model = DispensingRecord
    form = DispensingRecordForm
    fields = DISPENSING_FIELDS
    extra = 0
    ordering = ["-dispensed_at"]
    show_change_link = True


@admin.register(Patient)
class PatientAdmin(admin.ModelAdmin):
    form = PatientForm
    list_display = ["display_name", "external_ref", "region", "preferred_channel", "synthetic", "created"]
    list_filter = ["region", "preferred_channel", "preferred_language", "synthetic"]
    search_fields = ["display_name", "external_ref", "email", "phone"]
    readonly_fields = ["public_id", "synthetic", "created", "updated"]
    fieldsets = [
        (None, {"fields": ["display_name", "external_ref", "region"]}),
        ("Contact", {"fields": ["preferred_channel", "preferred_language", "email", "phone"]}),
        ("Record", {"fields": ["public_id", "synthetic", "created", "updated"]}),
    ]
    inlines = [DispensingInline]
    ordering = ["display_name"]  # patients_pa_display index
    show_full_result_count = False
    change_list_template = "admin/patients/patient/change_list.html"

    def get_urls(self):
        return [
            path("import/", self.admin_site.admin_view(self.import_view), name="patients_patient_import"),
        ] + super().get_urls()

    def import_view(self, request):
        """All-or-nothing CSV import of new patients; every bad row is listed with its row number. Each patient
        gets the admin's record of its addition by this user, as one added with the form does."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        result = None
        form = PatientImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            result = import_patients_csv(form.cleaned_data["file"].read(), user=request.user)
            if result.ok:
                self.message_user(request, f"Registered {result.imported} patients.", messages.SUCCESS)
                return redirect("admin:patients_patient_changelist")
        return _import_page(self, request, form, result, "Import patients from CSV",
                            "admin/patients/patient/import.html")

    def get_deleted_objects(self, objs, request):
        """A patient who has decisions is listed as protected, so the admin says why and deletes nothing
        (patients.deletion refuses the delete itself too)."""
        to_delete, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        return to_delete, counts, perms_needed, [*protected, *protected_descriptions(objs)]

    def save_formset(self, request, form, formset, change):
        """Inline dispensing rows go through the dispensing service (row + audit + one announcement per
        transaction: the admin's changeform is one transaction) and warn as the dispensing form does."""
        if formset.model is not DispensingRecord:
            return super().save_formset(request, form, formset, change)
        actor = actor_of(request)
        saved = formset.save(commit=False)
        for record in formset.deleted_objects:
            delete_dispensing(record, actor=actor)
        for record in saved:
            save_dispensing(record, actor=actor)
        formset.save_m2m()
        if warning := recall_warning(saved):
            self.message_user(request, warning, messages.WARNING)


@admin.register(DispensingRecord)
class DispensingRecordAdmin(admin.ModelAdmin):
    form = DispensingRecordForm
    change_list_template = "admin/patients/dispensingrecord/change_list.html"
    list_display = ["dispensed_at", "patient", "drug", lot_column, "ndc", "quantity", "region", "site"]
    list_filter = ["region", "lot_unknown", "synthetic"]
    list_select_related = ["patient"]
    search_fields = ["lot", "drug", "ndc", "patient__external_ref"]  # shows the box; see get_search_results
    search_help_text = ("A lot, drug or NDC (as printed: normalised before matching), a patient reference, "
                        "or 'unknown' for dispensings whose lot was not recorded.")
    autocomplete_fields = ["patient"]
    readonly_fields = ["region", "gtin", "lot_text", "lot_reading", "lot_alternatives", "synthetic", "created"]
    ordering = ["-id"]  # newest first on the primary key: no sort over a million rows
    show_full_result_count = False

    def get_search_results(self, request, queryset, search_term):
        """Exact matches on normalised values, each on its own index. The default OR of ILIKEs across a
        join scanned all rows: 2.5 s per search at 1M rows (bench DB); this takes ~0.1 s there."""
        term = search_term.strip()
        if not term:
            return queryset, False
        # Patient ids resolved first: as a subquery inside the OR, the planner misjudged it and walked
        # the primary key backwards over every row.
        match = Q(patient_id__in=list(Patient.objects.filter(external_ref=term).values_list("id", flat=True)))
        if term.lower() == "unknown":
            match |= Q(lot_unknown=True)
        if lot := read_lot_field(term).lot or canonical_lot(term):
            match |= Q(lot=lot) | (READ_WITH_DOUBT & Q(lot_alternatives__contains=[lot]))
        # The identity key as the row stores it: ingredients, or the product text of a name the
        # vocabulary does not know ("LOSART POT 50MG TAB" finds the rows typed that way).
        if drug := identity_key(term)[0]:
            match |= Q(drug=drug)
        try:
            match |= Q(ndc=normalize_ndc(term))
        except ValueError:
            pass  # not an NDC
        return queryset.filter(match), False

    def save_model(self, request, obj, form, change):
        save_dispensing(obj, actor=actor_of(request))
        if warning := recall_warning([obj]):
            self.message_user(request, warning, messages.WARNING)

    def delete_model(self, request, obj):
        delete_dispensing(obj, actor=actor_of(request))

    def delete_queryset(self, request, queryset):
        # The changelist's "delete selected" runs outside the admin's transaction: one here, so the
        # rows, their audit and the one announcement go together.
        actor = actor_of(request)
        with transaction.atomic():
            for record in queryset.select_related("patient"):
                delete_dispensing(record, actor=actor)

    def get_urls(self):
        return [
            path("import/", self.admin_site.admin_view(self.import_view), name="patients_dispensingrecord_import"),
        ] + super().get_urls()

    def import_view(self, request):
        """All-or-nothing CSV import; every bad row is listed with its row number."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        result = None
        form = DispensingImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            result = import_dispensing_csv(form.cleaned_data["file"].read(), actor=f"{actor_of(request)} (csv)",
                                           user=request.user)
            if result.ok:
                registered = f" and registered {len(result.patients)} new patients" if result.patients else ""
                self.message_user(request, f"Imported {result.imported} dispensing rows{registered}.", messages.SUCCESS)
                if warning := recall_warning(result.records):
                    self.message_user(request, warning, messages.WARNING)
                return redirect("admin:patients_dispensingrecord_changelist")
        return _import_page(self, request, form, result, "Import dispensing from CSV",
                            "admin/patients/dispensingrecord/import.html")


def _import_page(model_admin, request, form, result, title: str, template: str) -> TemplateResponse:
    """An import page: the form, and every problem of a refused file (400, as any refused form post)."""
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": title,
        "form": form,
        "result": result,
        "max_rows": f"{MAX_ROWS:,}",
        "max_mb": MAX_IMPORT_BYTES // 1024 // 1024,
    }
    status = 400 if request.method == "POST" and (result is None or not result.ok) else 200
    return TemplateResponse(request, template, context, status=status)
