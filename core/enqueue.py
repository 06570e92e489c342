"""Queue a Celery task by its registered name, for modules that sit below the task module whose task
they queue: an app's tasks.py imports the code its tasks run, so that code importing tasks.py back
would be an import cycle (.importlinter, "No import cycles inside an app").

    send(name, *args, **kwargs)            queue it now; raises as delay() does when the broker is down
    send_on_commit(name, *args, **kwargs)  queue it once the caller's transaction commits (at once
                                           outside one); a broker that is down is logged, not raised

Where the task module is loaded (the web process, a worker, tests: each app's tasks are imported at
start) the task's own delay() is used, so eager mode and test doubles of delay() apply as before;
elsewhere the broker is sent the name."""

import functools
import logging

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)


def send(name: str, *args, **kwargs):
    task = current_app.tasks.get(name)
    if task is not None:
        return task.delay(*args, **kwargs)
    return current_app.send_task(name, args=args, kwargs=kwargs)


def send_on_commit(name: str, *args, **kwargs) -> None:
    transaction.on_commit(functools.partial(_send_logged, name, args, kwargs))


def _send_logged(name: str, args, kwargs) -> None:
    try:
        send(name, *args, **kwargs)
    except Exception:  # noqa: BLE001 - no broker: each queued task has a periodic run that finds the same work
        log.exception("could not queue %s; its periodic run picks the work up", name)
