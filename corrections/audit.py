"""The one way an audit event is written: who (a user, or the process: sweep, dispatcher), what, on
which correction, the state before and after. Called inside the state change's own transaction."""

from .models import AuditEvent

SWEEP = "sweep"
DISPATCHER = "dispatcher"


def record(action: str, *, by, correction=None, decision=None, sweep_run=None, before=None, after=None,
           note: str = "") -> AuditEvent:
    """`by` is the acting user, or a process label (SWEEP, DISPATCHER)."""
    user = None if isinstance(by, str) else by
    label = by if isinstance(by, str) else by.get_username()
    return AuditEvent.objects.create(
        actor=user, actor_label=label[:150], action=action, before=before or {}, after=after or {}, note=note,
        sweep_run=sweep_run, decision=decision,
        **({"correction_id": correction} if isinstance(correction, int) else {"correction": correction}))
