from django.apps import AppConfig


class CorrectionsConfig(AppConfig):
    name = "corrections"
    verbose_name = "Sweeps, corrections and outbox"

    def ready(self):
        from memory.services import supersession_batch_listeners

        from .tasks import enqueue_sweep_after_supersessions

        if enqueue_sweep_after_supersessions not in supersession_batch_listeners:
            supersession_batch_listeners.append(enqueue_sweep_after_supersessions)
