import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")

app = Celery("unsay")
# Every CELERY_* Django setting configures Celery; tasks live in each app's tasks.py.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Every log line of a task carries its task_id (and the request_id of the request that queued it).
from django_structlog.celery.steps import DjangoStructLogInitStep  # noqa: E402

app.steps["worker"].add(DjangoStructLogInitStep)
