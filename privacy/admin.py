"""Erasure certificates, and the erasure itself: "Add erasure certificate" is the erasure form (patient,
reason, a confirmation), open only to users with the erase permission; certificates are never edited."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from patients.models import Patient

from .models import ErasureCertificate
from .services import PERMISSION, erase_patient


class ErasureForm(forms.ModelForm):
    patient_ref = forms.CharField(label="Patient reference", max_length=64,
                                  help_text="The pharmacy's patient id, as on the patient record.")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="Why, e.g. the patient's erasure request and its date.")
    confirm = forms.BooleanField(
        label="I understand this replaces the patient's name, contact details and free text for good, and "
              "cancels any letter to them not yet sent.")

    class Meta:
        model = ErasureCertificate
        fields = []

    def clean_patient_ref(self):
        ref = self.cleaned_data["patient_ref"].strip()
        patient = Patient.objects.filter(external_ref=ref).first()
        if patient is None:
            raise ValidationError(f"No patient with reference {ref!r}.")
        self.patient = patient
        return ref


@admin.register(ErasureCertificate)
class ErasureCertificateAdmin(admin.ModelAdmin):
    list_display = ["erased_at", "patient_public_id", "erased_by", "reason", "chain_head_seq"]
    readonly_fields = ["patient_public_id", "erased_at", "erased_by", "reason", "counts", "tables",
                       "audit_event_id", "chain_head_seq", "chain_head_link"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = ErasureForm
            kwargs["fields"] = ["patient_ref", "reason", "confirm"]
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else []

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [(None, {"fields": ["patient_ref", "reason", "confirm"]})]
        return super().get_fieldsets(request, obj)

    def has_add_permission(self, request):
        return request.user.has_perm(PERMISSION)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        certificate = erase_patient(form.patient, by=request.user, reason=form.cleaned_data["reason"])
        obj.pk = certificate.pk
        obj.refresh_from_db()
