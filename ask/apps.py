from django.apps import AppConfig

from core.health import register_section


class AskConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "ask"
    verbose_name = "Ask (answers, reasoners, API clients and keys)"

    def ready(self):
        def model_usage():
            # AppConfig.ready: ask.services reads the models, which cannot be imported while apps load.
            from ask.services import usage_report  # noqa: PLC0415

            return {"model_usage": usage_report()}

        register_section(model_usage)
