from django.apps import AppConfig
from django.apps import apps as global_apps
from django.db import router
from django.db.models.signals import post_migrate

from core.roles import sync_group_permissions
from unsay_site.logs import configure


class UnsaySiteConfig(AppConfig):
    name = "unsay_site"
    verbose_name = "Unsay"

    def ready(self):
        # AppConfig.ready: importing checks registers the system checks (Django's place for that), and the
        # metrics collector reads the models, which cannot be imported while apps load.
        from unsay_site import checks  # noqa: F401, PLC0415
        from unsay_site.metrics import register_collector  # noqa: PLC0415

        configure()

        register_collector()
        post_migrate.connect(sync_groups_after_migrate, dispatch_uid="unsay_site.sync_groups")


def sync_groups_after_migrate(sender, using="default", apps=None, **kwargs):
    """Groups and their permissions from core.roles, after every migrate (and test flush), the way
    django.contrib.auth creates permissions: migrations stay frozen, the table stays the one source.
    Django sends post_migrate once per app with models (and every transactional test's flush sends them
    all); only the last app's signal runs the sync, when every app's permissions exist. Idempotent."""
    if not router.allow_migrate(using, "auth"):
        return
    with_models = [config for config in global_apps.get_app_configs() if config.models_module is not None]
    if sender is not None and with_models and sender is not with_models[-1]:
        return
    sync_group_permissions(global_apps, using=using)
