from django import forms
from django.conf import settings
from django.core.validators import MaxLengthValidator, MinValueValidator

from drugs.gs1 import ScanError, parse_scan
from patients.csvfile import MAX_IMPORT_BYTES
from patients.csvimport import MAX_PRODUCT_TEXT
from patients.models import DispensingRecord, Patient
from patients.scanning import Entered, apply_scan

SCAN_HELP = (
    "Scan the 2D barcode (GS1 DataMatrix) on the pack: NDC, lot, expiry and serial are read from it. "
    "Or paste the text printed under it, e.g. (01)00303785814771(17)210531(10)3069020(21)... "
    "Fields typed as well must agree with the scan."
)


class PatientForm(forms.ModelForm):
    region = forms.ChoiceField(
        choices=[],
        error_messages={"required": "A patient needs a home region; there is no safe default for where PHI lives."},
        help_text="Where this patient's records are stored (data residency).",
    )

    class Meta:
        model = Patient
        fields = ["display_name", "external_ref", "region", "preferred_channel", "preferred_language", "email", "phone"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["region"].choices = [("", "— choose a region —")] + [(r, r) for r in settings.UNSAY_REGIONS]
        # Letters go out in English unless a language is chosen: a form posted without the field (an older
        # page, a script) keeps the default rather than failing.
        self.fields["preferred_language"].required = False

    def clean_preferred_language(self):
        return self.cleaned_data.get("preferred_language") or Patient.Language.ENGLISH


class DispensingRecordForm(forms.ModelForm):
    """Drug and lot are checked by the model's clean(), which says *why* a value is refused. A scan
    fills NDC, lot, expiry and serial (patients.scanning)."""

    scan = forms.CharField(required=False, max_length=400, help_text=SCAN_HELP, label="Scan",
                           widget=forms.TextInput(attrs={"autocomplete": "off", "size": 40}))
    # Numbers and dates: digits 0-9 only. Django reads '١٢' (Arabic-Indic) as 12, which a person
    # checking the pack would not recognise as what was typed.
    ASCII_DIGIT_FIELDS = ("quantity", "expiry", "dispensed_at")

    class Meta:
        model = DispensingRecord
        fields = ["patient", "scan", "drug", "product_description", "ndc", "lot", "lot_unknown", "expiry", "serial",
                  "quantity", "dispensed_at", "site"]
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
        for name in ("drug", "product_description"):
            if name in self.fields:
                # The name as typed (kept in full as drug_text / product_description): a real product name
                # runs to hundreds of characters. `drug`'s own column holds the identity key derived from
                # it (patients.models.DispensingRecord.resolve_identity), not the typed text.
                field = self.fields[name]
                field.max_length = MAX_PRODUCT_TEXT
                field.validators = [v for v in field.validators if not isinstance(v, MaxLengthValidator)]
                field.validators.append(MaxLengthValidator(MAX_PRODUCT_TEXT))
                field.widget.attrs["maxlength"] = str(MAX_PRODUCT_TEXT)
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

    def _get_validation_exclusions(self):
        # The model checks `drug` after resolving the typed name to its identity key (clean()); its
        # column length applies to that key, not to the name as typed.
        return super()._get_validation_exclusions() | {"drug"}

    def _raw(self, name) -> str:
        value = self.fields[name].widget.value_from_datadict(self.data, self.files, self.add_prefix(name))
        return " ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value or "")

    def clean(self):
        cleaned = super().clean()
        for name in self.ASCII_DIGIT_FIELDS:
            if name in self.fields and any(ch.isdigit() and not ch.isascii() for ch in self._raw(name)):
                self.add_error(name, "Use the digits 0-9 (this has other digits, e.g. superscript or Arabic-Indic).")
        raw_scan = cleaned.get("scan")
        if raw_scan:
            self._apply_scan(raw_scan, cleaned)
        elif self.instance.gtin and "ndc" in self.changed_data:
            self.instance.gtin = ""  # the NDC was corrected by hand: the stored scan no longer describes the row
        return cleaned

    def _apply_scan(self, raw_scan, cleaned):
        try:
            scan = parse_scan(raw_scan)
        except ScanError as exc:
            self.add_error("scan", str(exc))
            return
        entered = Entered(ndc=cleaned.get("ndc") or "", lot=cleaned.get("lot") or "", expiry=cleaned.get("expiry"),
                          serial=cleaned.get("serial") or "", lot_unknown=bool(cleaned.get("lot_unknown")),
                          site=cleaned.get("site") or "")
        fill, errors = apply_scan(scan, entered)
        for name, message in errors.items():
            self.add_error(name if name in self.fields else "scan", message)
        if errors:
            return
        cleaned.update(ndc=fill.ndc, lot=fill.lot, expiry=fill.expiry, serial=fill.serial)
        self.instance.gtin = fill.gtin  # not a form field: construct_instance leaves it as set here


class CsvFileForm(forms.Form):
    """A CSV file for an import (patients.csvfile): refused here when it is over the size limit."""

    HEADER = ""
    file = forms.FileField(label="CSV file")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["file"].help_text = f"Header row: {self.HEADER}."

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_IMPORT_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size // 1024 // 1024} MB; the limit is {MAX_IMPORT_BYTES // 1024 // 1024} MB. "
                "Split it into smaller files."
            )
        return upload


class DispensingImportForm(CsvFileForm):
    HEADER = ("patient_ref, drug, product_description, ndc, lot, lot_unknown, expiry, serial, scan, quantity, "
              "dispensed_at, site; for patients not yet registered also display_name, region, preferred_channel, "
              "preferred_language, email, phone")


class PatientImportForm(CsvFileForm):
    HEADER = "external_ref, display_name, region, preferred_channel, preferred_language, email, phone"
