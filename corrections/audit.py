"""The one way a corrections audit event is written: who (a user, or the process: sweep, dispatcher), what,
on which correction, the state before and after. Called inside the state change's own transaction.

Each event is a link of the one audit chain (core.audit_chain): AuditEvent is a ChainedEvent, so saving it
registers it to be sealed after its transaction commits. A sweep page writes its events with COPY and
registers their ids itself (core.audit_chain.written). `manage.py verify_audit` checks the chain and
`manage.py seal_audit` links events a dead writer left outside it, recording a SEALED event.
"""

from django.utils import timezone

from .models import AuditEvent

SWEEP = "sweep"
DISPATCHER = "dispatcher"


def record(action: str, *, by, correction=None, decision=None, sweep_run=None, before=None, after=None,
           note: str = "") -> AuditEvent:
    """`by` is the acting user, or a process label (SWEEP, DISPATCHER)."""
    user = None if isinstance(by, str) else by
    label = (by if isinstance(by, str) else by.get_username())[:150]
    event = AuditEvent(
        at=timezone.now(), actor=user, actor_label=label, action=action, before=before or {}, after=after or {},
        note=note, sweep_run=sweep_run, decision=decision,
        **({"correction_id": correction} if isinstance(correction, int) else {"correction": correction}))
    event.save(force_insert=True)
    return event
