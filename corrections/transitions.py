"""Which status may follow which, for corrections and their outbox messages: the one table every state
change is checked against (issue #15). Writes that race use guarded UPDATEs (`WHERE status = <from>`);
this table says which `<from>` each of them may name, and `check` refuses anything else before a write."""

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


class InvalidTransition(ValueError):
    pass


def check(model, old: str, new: str) -> None:
    if new not in TABLES[model].get(old, set()):
        raise InvalidTransition(f"{model.__name__} cannot go from '{old}' to '{new}'")


def sources(model, new: str) -> list[str]:
    """Every status that may become `new`: what a guarded UPDATE to `new` may filter on."""
    return sorted(old for old, targets in TABLES[model].items() if new in targets)
