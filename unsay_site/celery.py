import os
import signal

from celery import Celery

from core import shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")

app = Celery("unsay")
# Every CELERY_* Django setting configures Celery; tasks live in each app's tasks.py.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Every log line of a task carries its task_id (and the request_id of the request that queued it).
from django_structlog.celery.steps import DjangoStructLogInitStep  # noqa: E402

app.steps["worker"].add(DjangoStructLogInitStep)


# SIGTERM (warm shutdown) lets a running sweep or ingest finish its page and hand the rest back
# (core.shutdown) instead of running to the end or dying mid-page. Celery's pool processes reset
# SIGTERM to "die"; each gets the core.shutdown handler instead, and the main process, on its own
# SIGTERM, passes the request on to them (it alone receives the signal from `kill`, Docker or the demo).
from celery import signals as _signals  # noqa: E402

_workers = []


@_signals.worker_init.connect
def _remember_worker(sender=None, **kwargs):
    _workers[:] = [sender]


_in_pool_process = []


@_signals.worker_process_init.connect
def _mark_pool_process(**kwargs):
    _in_pool_process.append(True)  # a prefork pool child (never the main process, nor eager mode)


@_signals.task_prerun.connect
def _pool_process_stops_between_pages(**kwargs):
    # At each task, not at worker_process_init: billiard resets the child's signals after that hook.
    if _in_pool_process:
        shutdown.install_sigterm_handler()


@_signals.worker_shutting_down.connect
def _ask_pool_processes_to_stop(sig=None, how=None, **kwargs):
    if how != "Warm" or not _workers:
        return
    try:
        info = _workers[0].pool.info
    except Exception:  # noqa: BLE001 - no pool to ask: Celery's own warm shutdown goes on
        return
    if "processes" not in info:  # solo / threads pool: the tasks run in this process
        shutdown.request_stop("on warm shutdown")
        return
    for pid in info["processes"]:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
