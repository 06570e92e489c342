from django import forms
from django.utils.translation import gettext_lazy as _

from ask.pack_check import PackInputError, read_pack
from patients.models import Patient


class AskForm(forms.Form):
    patient = forms.UUIDField(widget=forms.HiddenInput, error_messages={"required": "Pick a patient first."})
    question = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2, "cols": 60}))
    subject = forms.CharField(max_length=200, required=False,
                              help_text="Optional: the medicine, if the question doesn't name it.")

    def clean_patient(self):
        try:
            return Patient.objects.get(public_id=self.cleaned_data["patient"])
        except Patient.DoesNotExist:
            raise forms.ValidationError("That patient no longer exists.") from None


class PackForm(forms.Form):
    """Check my pack: what was typed or scanned, read by ask.pack_check.read_pack (its errors land on the
    field they are about; what was typed is kept in the form)."""

    ndc = forms.CharField(required=False, label=_("NDC (product code)"),
                          help_text=_("10 or 11 digits, as printed after “NDC” on the label, for example "
                                      "0378-5807-93."))
    lot = forms.CharField(required=False, label=_("Lot number"),
                          help_text=_("As printed on the pack, often after “LOT” near the expiry date."))
    gs1 = forms.CharField(required=False, label=_("Or the barcode's text"),
                          help_text=_("Filled in when you scan the square barcode; a barcode scanner can type it "
                                      "here."))

    def clean(self):
        data = super().clean()
        try:
            data["pack"] = read_pack(ndc=data.get("ndc", ""), lot=data.get("lot", ""), gs1=data.get("gs1", ""))
        except PackInputError as refused:
            for name, message in refused.errors.items():
                self.add_error(name, message)
        return data
