from django.apps import AppConfig


class RepliesConfig(AppConfig):
    """Patients answer a sent letter through a signed link; the answer reaches the recall worklist."""

    name = "replies"
    verbose_name = "Replies"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Every sent letter ends with its reply link (outbox sits below replies, so it is told, not imported).
        # AppConfig.ready: both read the models, which cannot be imported while apps load.
        from outbox import dispatch  # noqa: PLC0415

        from .links import footer  # noqa: PLC0415

        if footer not in dispatch.SEND_FOOTERS:
            dispatch.SEND_FOOTERS.append(footer)
