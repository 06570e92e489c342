"""Which status may follow which, for corrections and their outbox messages, and the one write of either
status column (`move`): a guarded UPDATE (`WHERE status IN <from>`) checked against this table, with its
audit event, in the caller's transaction. tests/house/test_status_writers.py fails on any other writer."""

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.transitions import InvalidTransition

from . import audit
from .models import Correction, OutboxMessage

C, M = Correction.Status, OutboxMessage.Status

CORRECTION = {
    C.DRAFT: {C.APPROVED, C.REJECTED, C.STALE},  # review; the sweep stales a draft a newer change replaced
    C.APPROVED: {C.SENT, C.STALE},                # the dispatcher; staled only while its message is not out
    C.REJECTED: set(),
    C.STALE: set(),
    C.SENT: set(),
}

OUTBOX = {
    M.HELD: {M.READY, M.CANCELLED},                        # approval releases it; rejection or staling cancels
    M.READY: {M.SENDING, M.CANCELLED},                     # a dispatcher claims it (one at a time)
    # sent / retry later / gave up / the dispatcher died / its correction is no longer approved:
    M.SENDING: {M.SENT, M.READY, M.FAILED, M.UNKNOWN, M.CANCELLED},
    M.FAILED: {M.READY, M.CANCELLED},                      # a pharmacist requeues; a rejection cancels
    M.UNKNOWN: {M.READY, M.CANCELLED},                     # a pharmacist confirms it did not go out, and requeues
    M.SENT: set(),
    M.CANCELLED: set(),
}

TABLES = {Correction: CORRECTION, OutboxMessage: OUTBOX}


def check(model, old: str, new: str) -> None:
    if new not in TABLES[model].get(old, set()):
        raise InvalidTransition(f"{model.__name__} cannot go from '{old}' to '{new}'")


def sources(model, new: str) -> list[str]:
    """Every status that may become `new`: what a guarded UPDATE to `new` may filter on."""
    return sorted(old for old, targets in TABLES[model].items() if new in targets)


def move(model, where: Q | dict, old, new: str, *, event: dict | None = None, **values) -> int:
    """UPDATE <model> SET status = new, **values WHERE <where> AND status IN old: the number of rows moved.

    Every `old -> new` is checked against the table before anything is written; rows in any other
    status are left alone (another writer got there first), which the count tells the caller.
    `event`: the audit event (corrections.audit.record's arguments, action first), recorded only
    when a row moved. Works for one row (`{"pk": id}`) and for a set (`{"correction__patient_id": p}`)."""
    olds = [old] if isinstance(old, str) else list(old)
    for source in olds:
        check(model, source, new)
    rows = model.objects.filter(where) if isinstance(where, Q) else model.objects.filter(**where)
    if model is Correction:
        values.setdefault("updated", timezone.now())  # update() bypasses auto_now
    with transaction.atomic():
        moved = rows.filter(status__in=olds).update(status=new, **values)
        if moved and event is not None:
            event = dict(event)
            audit.record(event.pop("action"), **event)
    return moved


def move_row(row, new: str, *, event: dict | None = None, **values) -> bool:
    """`move` for a row in hand: from its current status, and the instance updated to match when it moved."""
    moved = move(type(row), {"pk": row.pk}, row.status, new, event=event, **values) == 1
    if moved:
        row.status = new
        for name, value in values.items():
            if not hasattr(value, "resolve_expression"):
                setattr(row, name, value)
    return moved
