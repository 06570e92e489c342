from django.apps import AppConfig

from core.health import register_section

from .signals import facts_changed


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory (bitemporal facts and decisions)"

    def ready(self):
        # AppConfig.ready: both read the models, which cannot be imported while apps load.
        from .tasks import queue_embedding_after_facts  # noqa: PLC0415
        from .vectors import status_section  # noqa: PLC0415

        facts_changed.connect(queue_embedding_after_facts, dispatch_uid="memory.embed_after_facts")
        register_section(status_section)
