"""The pharmacy's stock by unit, from the DSCSA EPCIS events its suppliers send.

    Unit           one saleable package, by SGTIN (GTIN + serial) at a site, with lot, expiry, NDC and state
    ReceivedEvent  one EPCIS event as received (keyed by its eventID or content hash: re-sending an applied event
                   changes nothing), or an event refused with its reason (each refusal kept; it takes no key)
    Aggregation    a case (SSCC or parent SGTIN) and the units packed in it, so a case received is its units
    ShelfTask      a recall's quarantine work at one site: the units it matches and what staff confirmed
    ShelfEvent     audit trail of shelf actions (receiving, scan at fill, quarantine, return), naming the actor
    StaffSite      a site whose shelf page a person (pharmacist, pharmacy staff) may read, granted by an operator

Rows are written only by shelf.receiving, shelf.scans and shelf.quarantine, and a unit's state only by
shelf.transitions.move_units (checked against its table of moves); reads are in shelf.selectors.
"""

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.audit_chain import ChainedEvent


class Unit(models.Model):
    class State(models.TextChoices):
        ON_HAND = "on_hand", _("On hand")
        QUARANTINED = "quarantined", _("Quarantined")
        DISPENSED = "dispensed", _("Dispensed")
        RETURNED = "returned", _("Returned / shipped out")
        DESTROYED = "destroyed", _("Destroyed / decommissioned")

    site = models.CharField(max_length=200)
    gtin = models.CharField(max_length=14)
    serial = models.CharField(max_length=20)
    # 5-4-2 package NDC when the GTIN's hyphenation is known (EPCIS master data, or exactly one candidate
    # product known to us); otherwise "" and `ndc_products` holds every product the GTIN can stand for.
    ndc = models.CharField(max_length=13, blank=True)
    ndc_products = ArrayField(models.CharField(max_length=10), default=list, blank=True)
    lot = models.CharField(max_length=100, blank=True, help_text="Canonical lot (drugs.lots.canonical_lot).")
    lot_printed = models.CharField(max_length=100, blank=True)
    expiry = models.DateField(null=True, blank=True)
    product_name = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.ON_HAND)
    received_at = models.DateTimeField()
    changed_at = models.DateTimeField()
    # The fill that took this unit to a patient: set by a scan of its DataMatrix at fill (shelf.scans).
    dispensing = models.OneToOneField("patients.DispensingRecord", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="shelf_unit")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["site", "gtin", "serial"], name="shelf_unit_sgtin")]
        indexes = [
            # Used by a recall reaching the shelf: a recalled lot's units (any state: counts include the dispensed).
            models.Index(fields=["lot"], name="shelf_unit_lot"),
            # Used by all-lots recalls: a recalled product's units.
            GinIndex(fields=["ndc_products"], name="shelf_unit_products"),
            # Used by the scan at fill: a serial read at the till.
            models.Index(fields=["gtin", "serial"], name="shelf_unit_gtin_serial"),
        ]

    def __str__(self):
        return f"{self.gtin}.{self.serial} lot {self.lot_printed or self.lot} ({self.get_state_display()})"

    # drugs.matching reads a dispensing-like object: the unit is one.
    drug = ""

    @property
    def ndc_product(self) -> str:
        return self.ndc[:10] if self.ndc else ""


class ReceivedEvent(models.Model):
    class Status(models.TextChoices):
        APPLIED = "applied", _("Applied")
        REFUSED = "refused", _("Refused")

    site = models.CharField(max_length=200)
    # eventID when the sender gave one, else "sha256:" + the hash of the event's normalised content.
    event_key = models.CharField(max_length=300)
    event_type = models.CharField(max_length=40)
    action = models.CharField(max_length=10, blank=True)
    biz_step = models.CharField(max_length=60, blank=True)
    event_time = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices)
    reason = models.TextField(blank=True)
    units = models.PositiveIntegerField(default=0)
    source = models.CharField(max_length=300, blank=True)
    received_at = models.DateTimeField()

    class Meta:
        # Only an applied event takes its key: a refused one leaves its eventID free for the corrected resend
        # (and every refusal stays on record beside it).
        constraints = [models.UniqueConstraint(fields=["site", "event_key"], condition=Q(status="applied"),
                                               name="shelf_event_applied_once")]

    def __str__(self):
        return f"{self.event_type} {self.biz_step} {self.event_key[:40]} ({self.status})"


class Aggregation(models.Model):
    site = models.CharField(max_length=200)
    parent = models.CharField(max_length=200)  # EPC URI of the case (SSCC) or parent SGTIN
    child = models.CharField(max_length=200)   # EPC URI of a unit or an inner case

    class Meta:
        constraints = [models.UniqueConstraint(fields=["site", "parent", "child"], name="shelf_aggregation_once")]

    def __str__(self):
        return f"{self.parent} > {self.child}"


class ShelfTask(models.Model):
    """A recall at one site: the matching units (any state, so counts show what already left) and the
    staff's quarantine and return, with the counts they gave."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    recall_number = models.CharField(max_length=40)
    site = models.CharField(max_length=200)
    created = models.DateTimeField()
    updated = models.DateTimeField()
    quarantined_at = models.DateTimeField(null=True, blank=True)
    quarantined_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                       related_name="+")
    quarantine_count = models.PositiveIntegerField(null=True, blank=True)
    returned_at = models.DateTimeField(null=True, blank=True)
    returned_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="+")
    return_count = models.PositiveIntegerField(null=True, blank=True)
    # A recall that tells the pharmacy to destroy the product: the quarantined units destroyed on site.
    destroyed_at = models.DateTimeField(null=True, blank=True)
    destroyed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="+")
    destroy_count = models.PositiveIntegerField(null=True, blank=True)
    units = models.ManyToManyField(Unit, through="TaskUnit", related_name="tasks")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["recall_number", "site"], name="shelf_task_once")]

    def __str__(self):
        return f"shelf {self.recall_number} at {self.site}"


class TaskUnit(models.Model):
    task = models.ForeignKey(ShelfTask, on_delete=models.CASCADE)
    unit = models.ForeignKey(Unit, on_delete=models.CASCADE)
    match_class = models.CharField(max_length=20)
    rule = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "unit"], name="shelf_task_unit_once")]

    def __str__(self):
        return f"{self.task_id} > {self.unit_id} ({self.match_class})"


class ShelfEvent(ChainedEvent):
    """A shelf action (receiving, scan at fill or its refusal, match, quarantine, return, destruction): a link
    of the one audit chain (core.audit_chain)."""

    CHAIN_STRUCTURE = ("at", "actor_id", "actor_label", "action", "site", "recall_number")
    CHAIN_REDACTABLE = ("details",)

    class Action(models.TextChoices):
        RECEIVED = "received", _("EPCIS document received")
        SCANNED = "scanned", _("Unit scanned at fill")
        MATCHED = "matched", _("Recall matched units")
        QUARANTINED = "quarantined", _("Quarantine confirmed")
        RETURNED = "returned", _("Return confirmed")
        DESTROYED = "destroyed", _("Destruction confirmed")
        SCAN_REFUSED = "scan_refused", _("Scan at fill refused (the unit may not be dispensed)")

    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+")
    actor_label = models.CharField(max_length=150)
    action = models.CharField(max_length=12, choices=Action.choices)
    site = models.CharField(max_length=200, blank=True)
    recall_number = models.CharField(max_length=40, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["recall_number", "at"], condition=~Q(recall_number=""),
                                name="shelfevent_recall")]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_label} {self.action}"


class StaffSite(models.Model):
    """A site a person works at: their shelf page shows its stock (ADR 0015). Granted by an operator in the
    admin, like an API client's sites (ask.ClientSite, ADR 0012); never derived from what the person does."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="shelf_sites")
    site = models.CharField(max_length=200, help_text="Exactly as EPCIS receipts name it (Unit.site).")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name, verbose_name_plural = "staff site", "staff sites"
        constraints = [
            models.UniqueConstraint(fields=["user", "site"], name="shelf_staffsite_once"),
            models.CheckConstraint(condition=~Q(site=""), name="shelf_staffsite_named"),
        ]

    def __str__(self):
        return f"{self.user} @ {self.site}"
