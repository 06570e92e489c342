from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory (bitemporal facts and decisions)"

    def ready(self):
        from core.health import register_section

        from .signals import facts_changed
        from .tasks import queue_embedding_after_facts
        from .vectors import status_section

        facts_changed.connect(queue_embedding_after_facts, dispatch_uid="memory.embed_after_facts")
        register_section(status_section)
