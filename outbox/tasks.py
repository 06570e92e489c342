"""Celery tasks: the periodic outbox dispatch, a thin wrapper over outbox.dispatch."""

from celery import shared_task

from corrections.tasks import reap_dead_runs
from corrections.triggers import DISPATCH_OUTBOX

from .dispatch import dispatch_ready, flag_unknown_outcomes


# Registered under its old name, "corrections.tasks.dispatch_outbox" (corrections.triggers.DISPATCH_OUTBOX):
# the beat schedule rows and messages already in the broker name it so, and corrections queues it by name.
@shared_task(name=DISPATCH_OUTBOX)
def dispatch_outbox() -> str:
    reaped = reap_dead_runs()
    flagged = flag_unknown_outcomes()
    result = dispatch_ready()
    return f"{result.summary()}, flagged unknown {flagged}" + (f", dead runs resumed {reaped}" if reaped else "")
