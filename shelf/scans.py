"""A scan at fill ties the unit to the patient: the dispensing row's GTIN + serial (read from the pack's
DataMatrix by drugs.gs1 at the till) decommissions that unit on the shelf as dispensed.

    on_dispensing_changed(changes=...)   receiver of patients.dispensing.dispensing_changed (after commit)
    link_scanned(rows) -> int            units marked dispensed and linked to their row

patients never imports shelf: the link is made here, after the dispensing write committed, from the rows of
the patients that changed. A unit of the row's site is preferred; a row without a site takes the one unit
of that SGTIN if only one site holds it.
"""

import logging

from django.db import transaction
from django.utils import timezone

from patients.models import DispensingRecord

from .models import ShelfEvent, Unit

log = logging.getLogger(__name__)


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
            units = list(Unit.objects.select_for_update().filter(gtin=row.gtin, serial=row.serial,
                                                                 dispensing__isnull=True))
            here = [u for u in units if row.site and u.site == row.site] or (units if len(units) == 1 else [])
            if not here:
                continue
            unit = here[0]
            was = unit.state
            unit.state, unit.dispensing, unit.changed_at = Unit.State.DISPENSED, row, now
            unit.save(update_fields=["state", "dispensing", "changed_at"])
            ShelfEvent.objects.create(actor_label="scan at fill", action=ShelfEvent.Action.SCANNED, site=unit.site,
                                      details={"unit": unit.pk, "dispensing": row.pk, "was": was,
                                               "quarantined_unit_dispensed": was == Unit.State.QUARANTINED})
            linked += 1
    return linked
