from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory (bitemporal facts and decisions)"

    def ready(self):
        from unsay_site.health import register_section

        def model_usage():
            from .ask import usage_report

            return {"model_usage": usage_report()}

        register_section(model_usage)
