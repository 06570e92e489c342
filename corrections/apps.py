from django.apps import AppConfig


class CorrectionsConfig(AppConfig):
    name = "corrections"
    verbose_name = "Sweeps, corrections and outbox"

    def ready(self):
        from memory.services import supersession_listeners

        from .tasks import enqueue_sweep_after_supersession

        if enqueue_sweep_after_supersession not in supersession_listeners:
            supersession_listeners.append(enqueue_sweep_after_supersession)
