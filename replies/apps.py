from django.apps import AppConfig


class RepliesConfig(AppConfig):
    """Patients answer a sent letter through a signed link; the answer reaches the recall worklist."""

    name = "replies"
    verbose_name = "Replies"
    default_auto_field = "django.db.models.BigAutoField"
