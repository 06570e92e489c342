from django.apps import AppConfig


class CorrectionsConfig(AppConfig):
    name = "corrections"
    verbose_name = "Sweeps, corrections and outbox"

    def ready(self):
        from memory.signals import facts_changed
        from patients.dispensing import dispensing_changed

        from .tasks import enqueue_sweep_after_dispensing, enqueue_sweep_after_supersessions

        facts_changed.connect(enqueue_sweep_after_supersessions, dispatch_uid="corrections.sweep_after_facts")
        dispensing_changed.connect(enqueue_sweep_after_dispensing, dispatch_uid="corrections.sweep_after_dispensing")
