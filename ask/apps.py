from django.apps import AppConfig


class AskConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "ask"
    verbose_name = "Ask (answers, reasoners, API clients and keys)"

    def ready(self):
        from core.health import register_section

        def model_usage():
            from ask.services import usage_report

            return {"model_usage": usage_report()}

        register_section(model_usage)
