from django.apps import AppConfig


class ShelfConfig(AppConfig):
    """The pharmacy's stock by unit (DSCSA EPCIS receiving), what is on hand, and recall quarantine."""

    name = "shelf"
    verbose_name = "Shelf"
    default_auto_field = "django.db.models.BigAutoField"
