from django.apps import AppConfig

from memory.signals import facts_changed


class ShelfConfig(AppConfig):
    """The pharmacy's stock by unit (DSCSA EPCIS receiving), what is on hand, and recall quarantine."""

    name = "shelf"
    verbose_name = "Shelf"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # AppConfig.ready: each of these reads the models, which cannot be imported while apps load.
        from patients import scanning  # noqa: PLC0415
        from patients.dispensing import dispensing_changed  # noqa: PLC0415

        from .scans import on_dispensing_changed, refusal_at_fill  # noqa: PLC0415
        from .selectors import ndcs_received  # noqa: PLC0415
        from .tasks import queue_shelf_match_after_facts  # noqa: PLC0415

        # Both are sent after commit: a recall's units join its shelf task (queued: the writer does not wait
        # for matching), a scanned fill takes its unit.
        facts_changed.connect(queue_shelf_match_after_facts, dispatch_uid="shelf.quarantine_after_facts")
        dispensing_changed.connect(on_dispensing_changed, dispatch_uid="shelf.scan_after_dispensing")
        # A scan at fill reads the NDC a GTIN was received as (patients sits below shelf: it is told, not importing).
        if ndcs_received not in scanning.GTIN_NDC_SOURCES:
            scanning.GTIN_NDC_SOURCES.append(ndcs_received)
        # ...and is refused, before the fill is saved, for a unit the shelf may not see dispensed (quarantined).
        if refusal_at_fill not in scanning.FILL_REFUSALS:
            scanning.FILL_REFUSALS.append(refusal_at_fill)
