from django.apps import AppConfig


class WorklistConfig(AppConfig):
    name = "worklist"
    verbose_name = "Recall worklist"
