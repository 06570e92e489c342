from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "outbox"
    verbose_name = "Outbox dispatch"

    def ready(self):
        # Loaded at start, as every app's tasks are: corrections queues the dispatch by its name (core.enqueue),
        # which uses the task's own delay() where it is loaded (eager mode, test doubles).
        from . import tasks  # noqa: F401, PLC0415
