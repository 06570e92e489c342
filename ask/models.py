"""API clients, keys and model-usage counters: who may ask, where a key may act on stock, and how
often the model may be called. Their tables are named for this app (ask_*), like every model's."""

from django.db import models
from django.db.models import Q

# --- Ask: API clients, keys and model-usage counters ------------------------------------------
# A pharmacy client owns patients through ClientPatient (Patient has no client column; this table
# is the mapping, one client per patient). Keys are scoped to a client and optionally bound to
# one patient (patient-facing keys). A client holds the sites granted to it (ClientSite); its pharmacy
# keys change stock only there (docs/adr/0012-a-key-acts-at-the-sites-its-client-holds.md).


class ApiClient(models.Model):
    """A pharmacy (or pharmacy group) calling the JSON API."""

    name = models.CharField(max_length=200, unique=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "API client"

    def __str__(self):
        return self.name


class ClientPatient(models.Model):
    """Which client a patient belongs to. One client per patient; a pharmacy key may ask only for these."""

    client = models.ForeignKey(ApiClient, on_delete=models.CASCADE, related_name="patient_links")
    patient = models.OneToOneField("patients.Patient", on_delete=models.CASCADE, related_name="api_client_link")

    def __str__(self):
        return f"{self.patient_id} -> {self.client}"


class ClientSite(models.Model):
    """A site (a branch's shelf, as EPCIS receipts and dispensing name it) where a client's pharmacy keys
    may receive stock and move units. Granted by an operator, never derived from what a key writes: a key
    that could gain a site by naming it on a dispensing would hold every site. A site may be held by
    several clients (the branch's pharmacy system and its till)."""

    client = models.ForeignKey(ApiClient, on_delete=models.CASCADE, related_name="sites")
    site = models.CharField(max_length=200, help_text="Exactly as EPCIS receipts name it (?site=...).")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name, verbose_name_plural = "site", "sites"
        constraints = [
            models.UniqueConstraint(fields=["client", "site"], name="ask_clientsite_once"),
            models.CheckConstraint(condition=~Q(site=""), name="ask_clientsite_named"),
        ]

    def __str__(self):
        return f"{self.client} @ {self.site}"


class ApiKeyQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """An API key. Only sha256(secret) is stored; the secret is shown once, when the key is created."""

    class Kind(models.TextChoices):
        PHARMACY = "pharmacy", "Pharmacy (names a patient of its client per request)"
        PATIENT = "patient", "Patient-facing (bound to one patient)"

    client = models.ForeignKey(ApiClient, on_delete=models.PROTECT, related_name="keys")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    patient = models.ForeignKey("patients.Patient", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="api_keys", help_text="Required for patient-facing keys.")
    name = models.CharField(max_length=200, blank=True)
    # A pharmacist-scoped pharmacy key may also read recall exposure (which of its client's patients
    # received a recalled lot). A flag, not a third kind: it widens a pharmacy key, it binds no patient.
    pharmacist_scope = models.BooleanField(default=False, help_text="May read recall exposure for its client.")
    prefix = models.CharField(max_length=16, help_text="First characters of the secret, to recognise a key.")
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind="patient", patient__isnull=False) | Q(kind="pharmacy", patient__isnull=True)),
                name="apikey_patient_iff_patient_kind",
            ),
            models.CheckConstraint(condition=Q(pharmacist_scope=False) | Q(kind="pharmacy"),
                                   name="apikey_pharmacist_scope_pharmacy_only"),
        ]

    def __str__(self):
        return f"{self.prefix}… ({self.kind}, {self.client})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class UsageCounter(models.Model):
    """Uses counted per (scope, window start): model calls, API requests, checks of a pack, reply links.
    Written only by ask.rate_limits' conditional upsert, so concurrent requests can never exceed a cap."""

    scope = models.CharField(max_length=100, help_text='"daily" or "client:<id>" (hourly).')
    window_start = models.DateTimeField()
    n = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "window_start"], name="usage_counter_window_unique")]

    def __str__(self):
        return f"{self.scope}@{self.window_start:%Y-%m-%d %H:%M}: {self.n}"
