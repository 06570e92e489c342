import hashlib
import uuid
from datetime import timedelta

import phonenumbers
from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from core.audit_chain import ChainedEvent
from drugs.gs1 import GROUP_SEPARATOR
from drugs.identity import PRODUCT_SOURCE, UNRESOLVED, identity_key, is_product_key, product_key
from drugs.lot_field import is_placeholder_lot, read_lot_field
from drugs.lots import near_lot_key
from drugs.matching import Dispensed, dispensed
from drugs.ndc import ndc_product, normalize_ndc
from patients.text import problem as text_problem


def validate_region(value):
    if not value:
        raise ValidationError("A patient needs a home region; there is no safe default for where PHI lives.")
    if value not in settings.UNSAY_REGIONS:
        raise ValidationError(f"Unknown region {value!r}; configured regions: {', '.join(settings.UNSAY_REGIONS)}.")


def normalize_phone(value: str, *, synthetic: bool = False) -> str:
    """A phone number as E.164 ('+12025550143'), or ValidationError saying what is wrong. Numbers
    without a country code are read as UNSAY_PHONE_REGION's. A local-only number ('555-1234') is
    refused: an SMS cannot reach it. Synthetic patients may use the reserved fictional ranges
    (555-01xx), which are well formed but not assigned, so not "valid" to libphonenumber."""
    raw = (value or "").strip()
    if not raw:
        return ""
    try:
        number = phonenumbers.parse(raw, settings.UNSAY_PHONE_REGION)
    except phonenumbers.NumberParseException:
        raise ValidationError(f"{raw!r} is not a phone number; use the full number with area code, "
                              "e.g. +1 202 555 0143.") from None
    possible = phonenumbers.is_possible_number_with_reason(number)
    if possible != phonenumbers.ValidationResult.IS_POSSIBLE:
        raise ValidationError(f"{raw!r} is not a complete phone number (it needs the area code and, outside "
                              f"{settings.UNSAY_PHONE_REGION}, the country code), so an SMS could not reach it.")
    if not synthetic and not phonenumbers.is_valid_number(number):
        raise ValidationError(f"{raw!r} is not an assigned phone number in its country; check the digits.")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


class Patient(models.Model):
    class Channel(models.TextChoices):
        EMAIL = "email", "Email"
        SMS = "sms", "SMS"

    class Language(models.TextChoices):
        ENGLISH = "en", "English"
        SPANISH = "es", "Español"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # Home region drives REGIONAL BY ROW residency on CockroachDB (migration 0002); required, never defaulted.
    region = models.CharField(max_length=40, validators=[validate_region])
    display_name = models.CharField(max_length=200)
    email = models.EmailField(blank=True)
    phone = models.CharField(max_length=32, blank=True, help_text="E.164, e.g. +15555550123")
    preferred_channel = models.CharField(max_length=8, choices=Channel.choices, default=Channel.EMAIL)
    # The language letters and the reply page are written in (settings.LANGUAGES; catalogues in locale/).
    preferred_language = models.CharField(max_length=8, choices=Language.choices, default=Language.ENGLISH)
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
        existing = not self._state.adding
        with transaction.atomic():
            super().save(*args, **kwargs)
            if existing:
                # Dispensing rows are homed with their patient; a move of the patient moves them too.
                self.dispensings.exclude(region=self.region).update(region=self.region)

    def contact(self) -> tuple[str, str]:
        """(channel, address) a message to this patient goes to now: the preferred channel (email when
        none is recorded) and its phone number or email address ("" when the record has none). The one
        reading of it: drafting, review, requeue and sending all ask here. Reads only the three fields,
        so a row read as a tuple with them can borrow it (`contact = Patient.contact`)."""
        channel = self.preferred_channel or Patient.Channel.EMAIL
        return str(channel), (self.phone if channel == Patient.Channel.SMS else self.email) or ""

    # Text that reaches letters, messages and the review queue (patients.text).
    TEXT_FIELDS = ("display_name", "external_ref", "email", "phone")

    def clean(self):
        errors = plain_text_errors(self, self.TEXT_FIELDS)
        if self.phone and "phone" not in errors:
            try:
                self.phone = normalize_phone(self.phone, synthetic=self.synthetic)
            except ValidationError as exc:
                errors["phone"] = exc.messages
        # A notice must be deliverable on the channel the patient chose.
        if self.preferred_channel == self.Channel.EMAIL and not self.email:
            errors.setdefault("email", "Preferred channel is email, so an email address is required.")
        if self.preferred_channel == self.Channel.SMS and not self.phone:
            errors.setdefault("phone", "Preferred channel is SMS, so a phone number is required.")
        if errors:
            raise ValidationError(errors)


def plain_text_errors(instance, names, allowed: dict | None = None) -> dict[str, str]:
    """Per field, why its text is refused (control or bidi characters, patients.text), or nothing.
    `allowed`: per field, control characters that are data there."""
    errors = {}
    for name in names:
        if reason := text_problem(str(getattr(instance, name) or ""), allowed=(allowed or {}).get(name, "")):
            errors[name] = f"This value {reason}"
    return errors


FUTURE_SLACK = timedelta(minutes=5)


def dispensing_fingerprint(patient_id, drug, ndc, lot, expiry, dispensed_at, lot_alternatives=()) -> str:
    """What a decision reads from a dispensing row, hashed (memory.DecisionInput compares it).
    Also used for rows loaded without the ORM (bench COPY); migrations 0004 and 0010 keep frozen copies.
    The other lots a lot field may mean count only when there are any, so a row read cleanly keeps the
    fingerprint it always had."""
    parts = [patient_id, drug, ndc, lot, expiry, dispensed_at]
    if lot_alternatives:
        parts.append(",".join(lot_alternatives))
    return hashlib.sha256("|".join("" if p is None else str(p) for p in parts).encode()).hexdigest()


# The longest identity key a dispensing row stores: the (drug, lot) index exposure reads and the subject
# of a decision about the drug (memory.Decision.subject) hold this many characters, as a fact's subject does.
DRUG_KEY_MAX = 200


def dispensing_identity(text: str, product_description: str = "") -> tuple[str, str]:
    """(key, source) of a dispensing's drug as entered (drugs.identity.identity_key). A real product can
    name more ingredients than a key holds (a parenteral nutrition product's 20, 231 characters as a key):
    its product text is then its identity, as recall ingestion does for a fact's subject
    (recalls.record_identity.bounded), so the row is kept, never refused for its length. It is matched by NDC
    product and lot, or by that text and the exact lot, and the name as entered stays in drug_text."""
    key, source = identity_key(text, product_description)
    if len(key) <= DRUG_KEY_MAX:
        return key, source
    # The product description first: it names the product as its label does, as a recall's description
    # names it, so the two product texts can agree (drugs.identity.texts_agree).
    for candidate in (product_description, text):
        if bounded := product_key(candidate or "")[:DRUG_KEY_MAX]:
            return bounded, PRODUCT_SOURCE
    return "", UNRESOLVED


# Dates outside these years are typos ("201911", "2999-01-01"), not dispensings or expiries.
EARLIEST_YEAR, LATEST_YEAR = 1900, 2100


def _lot_part():
    return models.CharField(max_length=100)


# A row whose lot field was read with doubt (drugs.lot_field): queries on lot_alternatives repeat this
# condition so the partial index below is used.
READ_WITH_DOUBT = ~Q(lot_alternatives=[])


class DispensingRecord(models.Model):
    patient = models.ForeignKey(Patient, on_delete=models.CASCADE, related_name="dispensings")
    # Copied from the patient so the row can be homed with its patient (REGIONAL BY ROW).
    region = models.CharField(max_length=40, editable=False)
    # The identity key (drugs.identity.identity_key): sorted ingredients joined by "+", as recall subjects
    # are; for a name the vocabulary does not know, its product text ("product:basic care allergy",
    # drug_source "product-text"), matched to recalls by NDC product + lot or by text + lot; "" only
    # when nothing names the drug.
    drug = models.CharField(max_length=DRUG_KEY_MAX, blank=True, help_text="Ingredient identity, e.g. 'valsartan'.")
    # Text fields: a real product name (parenteral nutrition, kits) can run to hundreds of characters.
    drug_text = models.TextField(blank=True, help_text="The drug as entered or scanned.")
    drug_source = models.CharField(max_length=40, blank=True, help_text="Where the identity came from.")
    product_description = models.TextField(blank=True)
    ndc = models.CharField(max_length=13, blank=True, help_text="11-digit 5-4-2 package NDC.")
    # Labeler + product part of the NDC ("00378-5814"): what a lot is read against (drugs.matching).
    ndc_product = models.CharField(max_length=10, blank=True, editable=False)
    lot = models.CharField(max_length=100, blank=True,
                           help_text="The canonical lot (drugs.lots.canonical_lot: no prefix, spaces or "
                                     "punctuation, upper case); empty only when lot_unknown.")
    # The lot field as entered or scanned ("3069020 EXP 05/2026", "L: 3069020"), read by
    # drugs.lot_field.read_lot_field into the lot above, an expiry and the other lots it may mean.
    lot_text = models.CharField(max_length=200, blank=True, default="", db_default="", editable=False,
                                help_text="The lot field as entered, before it was read.")
    # Other canonical lots the lot field may mean when it could not be read cleanly (each token, runs of
    # tokens, the field with a date kept on): a recall of one of them is a probable match for the same
    # product, never a lot match alone (drugs.matching). Empty for a field read cleanly.
    # db_default as well: rows loaded by raw SQL (bench COPY) get the same value as the ORM's.
    lot_alternatives = ArrayField(_lot_part(), default=list, blank=True, editable=False,
                                  db_default=models.Value([], output_field=ArrayField(_lot_part())))
    # drugs.lots.near_lot_key of the lot: exposure reads a recall lot's rows (and near misses) by it.
    lot_near = models.CharField(max_length=100, blank=True, default="", db_default="", editable=False)
    # A dispensing whose lot was not recorded: matched by drug and product only (never by lot), and
    # shown as "unknown". Never an empty lot on its own (a check constraint holds both together).
    # db_default as well: rows loaded by raw SQL (bench COPY) get the same values as the ORM's.
    lot_unknown = models.BooleanField(
        default=False, db_default=False, verbose_name="lot unknown",
        help_text="Tick only when the lot cannot be read from the pack or was not recorded.")
    expiry = models.DateField(null=True, blank=True)
    # From the package's GS1 DataMatrix (DSCSA product identifier), when it was scanned.
    serial = models.CharField(max_length=20, blank=True, default="", db_default="",
                              help_text="Package serial number (GS1 AI 21), from the scan.")
    gtin = models.CharField(max_length=14, blank=True, editable=False, default="", db_default="",
                            help_text="GTIN-14 scanned from the package (GS1 AI 01); empty when typed.")
    quantity = models.PositiveIntegerField(default=0)
    dispensed_at = models.DateTimeField()
    site = models.CharField(max_length=200, blank=True)
    synthetic = models.BooleanField(default=False)
    # Hash of what a decision reads from this row (patient, drug, NDC, lot, expiry, date): a decision
    # records it per row (memory.DecisionInput), so a later edit makes that decision stale.
    fingerprint = models.CharField(max_length=64, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # Used by the sweep's inputs check: a patient's dispensing of one drug.
            models.Index(fields=["patient", "drug"], name="dispensing_patient_drug"),
            # Used by exposure: a recall lot resolves to patients through (drug, lot).
            models.Index(fields=["drug", "lot"], name="dispensing_drug_lot"),
            models.Index(fields=["lot_near"], name="dispensing_lot_near"),
            # Used by exposure: a recall lot found inside a lot field that could not be read cleanly. Only
            # such rows are indexed (most fields read cleanly): an entry per row would cost every import.
            GinIndex(fields=["lot_alternatives"], condition=READ_WITH_DOUBT, name="dispensing_lot_alternatives"),
            # Used by the admin search (an NDC typed by staff) and by scans (an NDC product's packages).
            models.Index(fields=["ndc"], name="dispensing_ndc"),
            # Used by exposure: an NDC product + lot match holds even when identity keys differ.
            models.Index(fields=["ndc_product", "lot"], name="dispensing_product_lot"),
            # Used by the admin's "lot unknown" filter and search: few rows, newest first.
            models.Index(fields=["-id"], condition=Q(lot_unknown=True), name="dispensing_lot_unknown"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=(Q(lot_unknown=True, lot="") | (Q(lot_unknown=False) & ~Q(lot=""))),
                name="dispensing_lot_known_or_marked_unknown",
                violation_error_message="A dispensing has a lot, or is marked 'lot unknown' (not both, not neither).",
            ),
        ]
        permissions = [
            # Granted to pharmacists (core.roles): the list of patients a recall touches.
            ("view_exposure", "Can see which patients a recall exposes"),
        ]

    def __str__(self):
        who = self.patient.external_ref if self.patient_id else "-"
        return f"{self.drug or self.drug_text} lot {self.lot_label} for patient {who}"

    def save(self, *args, **kwargs):
        self.resolve_identity()
        self.fill_derived()
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "fingerprint", "updated", "drug", "drug_text",
                                       "drug_source", "ndc_product", "lot", "lot_near", "lot_text",
                                       "lot_alternatives", "expiry", "serial"}
        super().save(*args, **kwargs)

    def fill_derived(self):
        """The columns derived from what was entered: the lot read from its field (canonical lot, the other
        lots it may mean, an expiry or serial it carries), its near key, 5-4-2 NDC, NDC product,
        fingerprint. Every write path calls it (save(), and patients.dispensing for bulk rows)."""
        self.read_lot()
        if self.ndc:
            self.ndc = normalize_ndc(self.ndc)
        self.ndc_product = ndc_product(self.ndc)
        if self.patient_id and not self.region:
            self.region = self.patient.region
        self.fingerprint = self.compute_fingerprint()

    def resolve_identity(self):
        """drug <- the identity key of what was entered (drug_text, else the product description; a name
        the vocabulary does not know, or more ingredients than a key holds, keeps its product text as the
        key: dispensing_identity). The entered text is kept in drug_text, so re-resolving (manage.py
        resolve_dispensing) starts from what the pharmacy typed, not from an earlier key."""
        if self.drug and not is_product_key(self.drug) and (
                not self.drug_text or identity_key(self.drug_text)[0] != self.drug):
            self.drug_text = self.drug  # a drug typed now, not the key of what was typed before
        if not self.drug_text:
            self.drug_text = self.product_description or ""
        self.drug, self.drug_source = dispensing_identity(self.drug_text, self.product_description)

    @property
    def identity_unresolved(self) -> bool:
        """No ingredient named: the identity is the product text (or nothing): a person may identify it."""
        return self.drug_source in (UNRESOLVED, PRODUCT_SOURCE)

    @property
    def lot_label(self) -> str:
        return "unknown" if self.lot_unknown else self.lot

    @property
    def lot_known(self) -> bool:
        """drugs.matching's reading of lot_unknown: an unrecorded lot matches only as a candidate."""
        return not self.lot_unknown

    def as_dispensed(self) -> Dispensed:
        """What drugs.matching reads of this row, as values (also before it is saved: its NDC product is
        then read from the NDC as entered)."""
        return dispensed(drug=self.drug, ndc=self.ndc, lot=self.lot, lot_unknown=self.lot_unknown, expiry=self.expiry,
                         dispensed_at=self.dispensed_at, product=self.ndc_product,
                         alternatives=self.lot_alternatives)

    def compute_fingerprint(self) -> str:
        return dispensing_fingerprint(self.patient_id, self.drug, self.ndc, self.lot, self.expiry, self.dispensed_at,
                                      self.lot_alternatives)

    def read_lot(self) -> str:
        """Read the lot field (drugs.lot_field) into lot, lot_alternatives and lot_near, keeping what was
        entered in lot_text; an expiry or serial written in the field fills its own field when that is
        empty. `lot` holds what was entered until it is read; a row saved again is read again from its
        lot_text. An expiry read from the field that is before the dispensing date is not used: a misread
        must not refuse the row (the text is kept). Returns the raw value read."""
        entered = self.lot or ""
        if self.lot_text and entered == read_lot_field(self.lot_text).lot:
            entered = self.lot_text  # the row as stored, saved again
        reading = read_lot_field(entered)
        self.lot_text = reading.text[:self._meta.get_field("lot_text").max_length]
        self.lot = reading.lot
        self.lot_alternatives = list(reading.alternatives)
        self.lot_near = near_lot_key(self.lot) if self.lot else ""
        dispensed_on = self.dispensed_at.date() if self.dispensed_at else None
        if reading.expiry and self.expiry is None and (dispensed_on is None or reading.expiry >= dispensed_on):
            self.expiry = reading.expiry
        if reading.serial and not self.serial:
            self.serial = reading.serial[:self._meta.get_field("serial").max_length]
        return entered

    @property
    def lot_reading(self) -> str:
        """How the lot field was read, for staff ("" when it held only the lot)."""
        return read_lot_field(self.lot_text).reading if self.lot_text else ""

    def normalise(self):
        """Bring drug, lot and NDC to the forms recalls use, and home the row with its patient.
        Raises ValidationError (per field) for what cannot be normalised."""
        errors = {}
        if not (self.drug_text or self.drug or self.product_description or "").strip():
            errors["drug"] = ("Drug is required (as on the label, e.g. 'Diovan 160 mg' or 'valsartan'); "
                              "recalls are matched on it.")
        else:
            self.resolve_identity()
        raw_lot = self.read_lot()
        if self.lot_unknown:
            if self.lot:
                errors["lot"] = f"Lot {self.lot} is given and 'lot unknown' is ticked: clear one of them."
        elif not self.lot:
            errors["lot"] = (
                "Lot number is missing"
                + (f" ({raw_lot!r} has no letters or digits)" if (raw_lot or "").strip() else "")
                + ": recalls are matched by lot, so a dispensing without one can't be checked. "
                "Copy it from the pack (or scan it); if it really cannot be known, tick 'lot unknown'."
            )
        elif is_placeholder_lot(raw_lot) or is_placeholder_lot(self.lot):
            errors["lot"] = (
                f"{raw_lot!r} is not a lot number. If the lot cannot be known, tick 'lot unknown' "
                "(CSV: lot_unknown = yes), so it is recorded as unknown rather than as a lot no recall names."
            )
        if self.ndc:
            try:
                self.ndc = normalize_ndc(self.ndc)
            except ValueError as exc:
                errors["ndc"] = f"Bad NDC: {exc}"
        if self.patient_id:
            self.region = self.patient.region
        if errors:
            raise ValidationError(errors)

    def clean_fields(self, exclude=None):
        # A raw NDC longer than the stored 5-4-2 form is explained by normalise() ("Bad NDC: ..."),
        # not by the column's length limit; the normalised value always fits.
        exclude = set(exclude or ())
        if self.ndc and len(self.ndc) > 13:
            exclude.add("ndc")
        super().clean_fields(exclude=exclude)

    TEXT_FIELDS = ("drug", "product_description", "lot", "serial", "site")
    # A scanner's group separator (ASCII 29) in a lot field is data: a GS1 element string scanned into
    # it (drugs.lot_field reads it; the text kept shows it as a visible symbol).
    ALLOWED_CONTROLS = {"lot": GROUP_SEPARATOR}

    def clean(self):
        # Before normalise() strips what it cannot keep.
        errors = plain_text_errors(self, self.TEXT_FIELDS, self.ALLOWED_CONTROLS)
        try:
            self.normalise()
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                errors.setdefault(name, messages)
        # A few minutes of slack for clocks of the till and the server disagreeing.
        if self.dispensed_at and self.dispensed_at > timezone.now() + FUTURE_SLACK:
            errors["dispensed_at"] = (
                f"Dispensed in the future ({self.dispensed_at:%Y-%m-%d %H:%M} UTC); "
                "record a dispensing after it happens."
            )
        for name in ("dispensed_at", "expiry"):
            value = getattr(self, name)
            if name not in errors and value is not None and not EARLIEST_YEAR <= value.year <= LATEST_YEAR:
                errors[name] = (f"The year {value.year} is not plausible here (expected {EARLIEST_YEAR} to "
                                f"{LATEST_YEAR}): a typo?")
        dates_readable = "expiry" not in errors and "dispensed_at" not in errors
        if dates_readable and self.expiry and self.dispensed_at and self.expiry < self.dispensed_at.date():
            errors["expiry"] = (
                f"Expiry {self.expiry:%Y-%m-%d} is before the dispensing date {self.dispensed_at:%Y-%m-%d}: "
                "an expired pack, or a typo in one of the dates."
            )
        if errors:
            raise ValidationError(errors)


class DispensingChange(ChainedEvent):
    """Audit of every dispensing write (patients.dispensing): who changed which row, before and after; a link
    of the one audit chain (core.audit_chain). Its region is where the row lives, not what happened, so it is
    outside the hash."""

    CHAIN_STRUCTURE = ("at", "actor_label", "action", "patient_id", "dispensing_id")
    CHAIN_REDACTABLE = ("before", "after")

    class Action(models.TextChoices):
        CREATED = "created", "Created"
        UPDATED = "updated", "Updated"
        DELETED = "deleted", "Deleted"

    at = models.DateTimeField(auto_now_add=True)
    actor_label = models.CharField(max_length=150, help_text="Username, or the path (csv, api).")
    action = models.CharField(max_length=8, choices=Action.choices)
    # Not cascaded: the audit of a deleted patient's dispensing stays (drugs and lots, no identity), so the
    # audit chain keeps every link.
    patient = models.ForeignKey(Patient, on_delete=models.DO_NOTHING, db_constraint=False,
                                related_name="dispensing_changes")
    region = models.CharField(max_length=40, editable=False)
    # No FK: the row may be deleted, the audit stays.
    dispensing_id = models.BigIntegerField()
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["patient", "at"], name="dispensing_change_patient")]

    def __str__(self):
        return f"{self.action} dispensing {self.dispensing_id} by {self.actor_label}"
