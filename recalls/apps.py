from django.apps import AppConfig


class RecallsConfig(AppConfig):
    name = "recalls"
    verbose_name = "Recalls and labels (openFDA)"
