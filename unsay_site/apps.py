from django.apps import AppConfig


class UnsaySiteConfig(AppConfig):
    name = "unsay_site"
    verbose_name = "Unsay"

    def ready(self):
        from . import checks  # noqa: F401  (registers system checks)
        from .logs import configure
        from .metrics import register_collector

        configure()

        register_collector()
