import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from recalls.normalize import normalize_drug_name, normalize_lot


def validate_region(value):
    if not value:
        raise ValidationError("A patient needs a home region; there is no safe default for where PHI lives.")
    if value not in settings.UNSAY_REGIONS:
        raise ValidationError(f"Unknown region {value!r}; configured regions: {', '.join(settings.UNSAY_REGIONS)}.")


class Patient(models.Model):
    class Channel(models.TextChoices):
        EMAIL = "email", "Email"
        SMS = "sms", "SMS"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # Home region drives REGIONAL BY ROW residency on CockroachDB (sql/); required, never defaulted.
    region = models.CharField(max_length=40, validators=[validate_region])
    display_name = models.CharField(max_length=200)
    email = models.EmailField(blank=True)
    phone = models.CharField(max_length=32, blank=True, help_text="E.164, e.g. +15555550123")
    preferred_channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.EMAIL)
    external_ref = models.CharField(max_length=64, unique=True, help_text="The pharmacy's own patient id.")
    synthetic = models.BooleanField(default=False, help_text="Generated demo/benchmark data, not a real person.")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["display_name"])]

    def __str__(self):
        return f"{self.display_name} ({self.external_ref})"

    def save(self, *args, **kwargs):
        validate_region(self.region)  # refused even when a caller skips full_clean()
        super().save(*args, **kwargs)


class DispensingRecord(models.Model):
    patient = models.ForeignKey(Patient, on_delete=models.CASCADE, related_name="dispensings")
    # Copied from the patient so the row can be homed with its patient (REGIONAL BY ROW).
    region = models.CharField(max_length=40, editable=False)
    drug = models.CharField(max_length=200, help_text="Normalised generic name, as recall subjects are.")
    product_description = models.CharField(max_length=500, blank=True)
    ndc = models.CharField(max_length=13, blank=True, help_text="11-digit 5-4-2 package NDC.")
    lot = models.CharField(max_length=100, help_text="Normalised exactly as recall lots are.")
    expiry = models.DateField(null=True, blank=True)
    quantity = models.PositiveIntegerField(default=0)
    dispensed_at = models.DateTimeField()
    site = models.CharField(max_length=200, blank=True)
    synthetic = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # Used by exposure: a recall lot resolves to patients through (drug, lot).
            models.Index(fields=["drug", "lot"], name="dispensing_drug_lot"),
            models.Index(fields=["lot"], name="dispensing_lot"),
        ]

    def __str__(self):
        return f"{self.drug} lot {self.lot} -> {self.patient_id}"

    def save(self, *args, **kwargs):
        self.drug = normalize_drug_name(self.drug)
        self.lot = normalize_lot(self.lot)
        if self.patient_id and not self.region:
            self.region = self.patient.region
        super().save(*args, **kwargs)
