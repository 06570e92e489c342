"""What starts corrections' background work: the Celery task names, and whether a write triggers a
sweep here. corrections.tasks defines the tasks under these names; the modules its tasks call (the
sweep, the review) queue them by name (core.enqueue), never by importing corrections.tasks back.

    SWEEP_FACTS, SWEEP_PATIENTS, PERIODIC_SWEEP, DISPATCH_OUTBOX   registered task names
    sweep_triggers_enabled() -> bool
    auto_sweep_suppressed()  context manager: writes inside it queue no sweep"""

import contextlib
import threading

from django.conf import settings

SWEEP_FACTS = "corrections.tasks.sweep_facts"
SWEEP_PATIENTS = "corrections.tasks.sweep_patients"
PERIODIC_SWEEP = "corrections.tasks.periodic_sweep"
DISPATCH_OUTBOX = "corrections.tasks.dispatch_outbox"

_local = threading.local()


@contextlib.contextmanager
def auto_sweep_suppressed():
    """For callers that sweep synchronously right after (demo_story, bench): no background sweep."""
    previous = getattr(_local, "suppressed", False)
    _local.suppressed = True
    try:
        yield
    finally:
        _local.suppressed = previous


def suppressed() -> bool:
    return getattr(_local, "suppressed", False)


def triggers_on(chosen_settings) -> bool:
    """settings.UNSAY_SWEEP_ON_SUPERSESSION, or when unset: on unless Celery is eager."""
    chosen = chosen_settings.UNSAY_SWEEP_ON_SUPERSESSION
    return (not chosen_settings.CELERY_TASK_ALWAYS_EAGER) if chosen is None else chosen


def sweep_triggers_enabled() -> bool:
    """With Celery in eager mode (no broker: tests without Redis) a task would run inline inside
    whatever wrote the row, so there the triggers are opt-in (UNSAY_SWEEP_ON_SUPERSESSION=1)."""
    return triggers_on(settings) and not suppressed()
