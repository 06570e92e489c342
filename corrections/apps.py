from django.apps import AppConfig


class CorrectionsConfig(AppConfig):
    name = "corrections"
    verbose_name = "Sweeps, corrections and outbox"

    def ready(self):
        # AppConfig.ready: the receivers' modules read models, which are not loaded when this module is.
        from memory.signals import facts_changed  # noqa: PLC0415
        from patients.dispensing import dispensing_changed  # noqa: PLC0415

        from .tasks import enqueue_sweep_after_dispensing, enqueue_sweep_after_supersessions  # noqa: PLC0415

        facts_changed.connect(enqueue_sweep_after_supersessions, dispatch_uid="corrections.sweep_after_facts")
        dispensing_changed.connect(enqueue_sweep_after_dispensing, dispatch_uid="corrections.sweep_after_dispensing")
