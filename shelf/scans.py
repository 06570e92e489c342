"""A scan at fill ties the unit to the patient: the dispensing row's GTIN + serial (read from the pack's
DataMatrix by drugs.gs1 at the till) decommissions that unit on the shelf as dispensed.

    refusal_at_fill(gtin, serial, site) -> str   why the shelf refuses this pack at fill ('' when it does not);
                                                 registered in patients.scanning.FILL_REFUSALS (shelf.apps)
    on_dispensing_changed(changes=...)           receiver of patients.dispensing.dispensing_changed (after commit)
    link_scanned(rows) -> int                    units marked dispensed and linked to their row

patients never imports shelf: the form and the CSV import ask the registered refusal before the row is saved
(a quarantined unit is never dispensed: staff are told which recall holds it and to fill from another pack),
and the link is made here, after the dispensing write committed, from the rows of the patients that changed.
A row that reached the database another way (or whose unit was quarantined in between) does not move its unit,
nor does a row whose unit is already tied to another fill: the refusal is recorded once as a `scan_refused`
ShelfEvent, with its reason. A unit of the row's site is preferred; a row
without a site takes the one unit of that SGTIN if only one site holds it.
"""

import logging

from django.db import transaction
from django.utils import timezone

from patients.models import DispensingRecord

from .models import ShelfEvent, Unit
from .transitions import By, move_units, recalls_quarantining, why_not

log = logging.getLogger(__name__)


def _scanned_unit(units, site: str):
    here = [u for u in units if site and u.site == site] or (units if len(units) == 1 else [])
    return here[0] if here else None


def refusal_at_fill(gtin: str, serial: str, site: str = "") -> str:
    """The scan at the till, before the fill is saved: a unit the shelf holds that may not be dispensed."""
    if not (gtin and serial):
        return ""
    unit = _scanned_unit(list(Unit.objects.filter(gtin=gtin, serial=serial).order_by("id")), site)
    if unit is None or unit.state == Unit.State.DISPENSED:  # unknown here, or already out (linked or by EPCIS)
        return ""
    return why_not(unit, Unit.State.DISPENSED, By.SCAN)


def on_dispensing_changed(sender=None, changes=(), **kwargs):
    patient_ids = sorted({patient_id for patient_id, _drug in changes})
    if not patient_ids:
        return
    try:
        rows = (DispensingRecord.objects.filter(patient_id__in=patient_ids, shelf_unit__isnull=True)
                .exclude(serial="").exclude(gtin=""))
        link_scanned(list(rows))
    except Exception:  # the dispensing already committed; a later write of the patient retries the link
        log.exception("shelf: linking scanned units for patients %s failed", patient_ids)


def link_scanned(rows) -> int:
    linked = 0
    now = timezone.now()
    with transaction.atomic():
        for row in rows:
            unit = _scanned_unit(list(Unit.objects.select_for_update().filter(
                gtin=row.gtin, serial=row.serial, dispensing__isnull=True).order_by("id")), row.site)
            if unit is None:
                _linked_elsewhere(row)
                continue
            details = {"unit": unit.pk, "dispensing": row.pk, "was": unit.state}
            if unit.state == Unit.State.DISPENSED:  # dispensed by an EPCIS event: the scan names the patient
                Unit.objects.filter(pk=unit.pk).update(dispensing=row)
                ShelfEvent.objects.create(actor_label="scan at fill", action=ShelfEvent.Action.SCANNED,
                                          site=unit.site, details=details)
            elif reason := why_not(unit, Unit.State.DISPENSED, By.SCAN):
                _refused(unit, row, reason, details)
                continue
            else:
                move_units([unit], Unit.State.DISPENSED, by=By.SCAN, dispensing=row, changed_at=now, event={
                    "actor_label": "scan at fill", "action": ShelfEvent.Action.SCANNED, "site": unit.site,
                    "details": details})
            linked += 1
    return linked


def _linked_elsewhere(row) -> None:
    """The scanned unit is already tied to another fill (a serial is one pack): the row stays as typed --
    exposure reads its lot and product, not the link -- and the shelf records why it did not link it."""
    other = _scanned_unit(list(Unit.objects.filter(gtin=row.gtin, serial=row.serial)
                               .exclude(dispensing__isnull=True).exclude(dispensing=row).order_by("id")), row.site)
    if other is None:
        return
    reason = (f"this pack (serial {row.serial}) is already linked to another fill (dispensing #{other.dispensing_id}): "
              "check which patient received it")
    _refused(other, row, reason, {"unit": other.pk, "dispensing": row.pk, "was": other.state,
                                  "linked_to": other.dispensing_id})


def _refused(unit, row, reason: str, details: dict) -> None:
    """Once per unit and fill: every later write of the patient tries the link again."""
    if ShelfEvent.objects.filter(action=ShelfEvent.Action.SCAN_REFUSED, details__unit=unit.pk,
                                 details__dispensing=row.pk).exists():
        return
    log.warning("shelf: a fill scanned unit %s, which stays %s", unit.pk, unit.state)
    recalls = recalls_quarantining(unit) if unit.state == Unit.State.QUARANTINED else []
    ShelfEvent.objects.create(actor_label="scan at fill", action=ShelfEvent.Action.SCAN_REFUSED, site=unit.site,
                              recall_number=recalls[0] if recalls else "", details={**details, "reason": reason})
