from django import forms
from django.conf import settings
from django.core.validators import MaxLengthValidator, MinValueValidator

from .models import DispensingRecord, Patient

MAX_IMPORT_BYTES = 20 * 1024 * 1024


class PatientForm(forms.ModelForm):
    region = forms.ChoiceField(
        choices=[],
        error_messages={"required": "A patient needs a home region; there is no safe default for where PHI lives."},
        help_text="Where this patient's records are stored (data residency).",
    )

    class Meta:
        model = Patient
        fields = ["display_name", "external_ref", "region", "preferred_channel", "email", "phone"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["region"].choices = [("", "— choose a region —")] + [(r, r) for r in settings.UNSAY_REGIONS]


class DispensingRecordForm(forms.ModelForm):
    """Drug and lot are checked by the model's clean(), which says *why* a value is refused."""

    class Meta:
        model = DispensingRecord
        fields = ["patient", "drug", "product_description", "ndc", "lot", "expiry", "quantity",
                  "dispensed_at", "site"]
        help_texts = {
            "ndc": "Package NDC as printed (e.g. 0378-5814-77); stored as 11 digits, 5-4-2.",
            "lot": "As printed on the pack; stored upper-case without 'Lot #' or spaces.",
            "drug": "Generic name; left empty, it is taken from the product description.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("drug", "lot"):
            if name in self.fields:
                self.fields[name].required = False
        if "ndc" in self.fields:
            # The model's clean() explains a bad NDC ("expected 10 digits ..."); a bare length limit
            # on the raw text would pre-empt it with a less useful message.
            self.fields["ndc"].max_length = None
            self.fields["ndc"].validators = [v for v in self.fields["ndc"].validators
                                             if not isinstance(v, MaxLengthValidator)]
            self.fields["ndc"].widget.attrs.pop("maxlength", None)
        if "quantity" in self.fields:
            # As the CSV import: a dispensing of nothing is a typo, not a record.
            self.fields["quantity"].min_value = 1
            self.fields["quantity"].validators.append(MinValueValidator(1, "Quantity must be at least 1."))
            self.fields["quantity"].widget.attrs["min"] = 1
            if not self.instance.pk:
                self.initial["quantity"] = None  # not the model default 0: make staff enter it


class DispensingImportForm(forms.Form):
    file = forms.FileField(
        label="CSV file",
        help_text="Header row: patient_ref, drug, product_description, ndc, lot, expiry, quantity, dispensed_at, site.",
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_IMPORT_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size // 1024 // 1024} MB; the limit is {MAX_IMPORT_BYTES // 1024 // 1024} MB. "
                "Split it into smaller files."
            )
        return upload
