"""The one way an audit event is written: who (a user, or the process: sweep, dispatcher), what, on
which correction, the state before and after. Called inside the state change's own transaction.

Every event becomes a link of one tamper-evident chain per deployment:

    content_hash = sha256(canonical JSON of the event's content)      written with the event
    link_hash    = sha256(previous link_hash | seq | content_hash)    written when it is sealed

The content hash is written in the state change's own transaction. The link is written right after
that transaction commits (`seal`, on commit, in its own READ COMMITTED transaction that locks the chain
head), in the order events were written. A seal links every event still unlinked, so an event whose
writer died between its commit and its seal is linked by the next writer's seal (or `verify_audit`).

Why not in the same transaction: a sweep page reads one REPEATABLE READ snapshot, and a chain head
advanced by another writer after that snapshot began can be neither read nor locked there
(PostgreSQL refuses the lock: "could not serialize access"), so a link written inside the page would
fork the chain or fail the page. `verify_chain` (`manage.py verify_audit`) recomputes
every hash and names the first broken link: an event edited, deleted or inserted by hand breaks the
chain from there on.
"""

import hashlib
import json
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from core.retry import run_in_transaction

from .models import AuditChainHead, AuditEvent

SWEEP = "sweep"
DISPATCHER = "dispatcher"
CHAIN_START = "0" * 64


def content_hash(*, at, actor_label, action, correction_id, decision_id, sweep_run_id, before, after, note) -> str:
    """The hash of what an event says (who, what, on which rows, before/after, note, when)."""
    canonical = json.dumps(
        {"at": at.isoformat(), "actor": actor_label, "action": action, "correction": correction_id,
         "decision": decision_id, "sweep_run": sweep_run_id, "before": before or {}, "after": after or {},
         "note": note or ""},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def link_hash(previous: str, seq: int, content: str) -> str:
    return hashlib.sha256(f"{previous}|{seq}|{content}".encode()).hexdigest()


def event_content_hash(event: AuditEvent) -> str:
    return content_hash(at=event.at, actor_label=event.actor_label, action=event.action,
                        correction_id=event.correction_id, decision_id=event.decision_id,
                        sweep_run_id=event.sweep_run_id, before=event.before, after=event.after, note=event.note)


def _head() -> AuditChainHead:
    """The chain head, locked for the rest of the transaction (created on first use)."""
    head = AuditChainHead.objects.select_for_update().filter(pk=1).first()
    if head is None:
        AuditChainHead.objects.bulk_create([AuditChainHead(pk=1, seq=0, link_hash=CHAIN_START)],
                                           ignore_conflicts=True)
        head = AuditChainHead.objects.select_for_update().get(pk=1)
    return head


SEAL_BATCH = 5000


def _seal_batch() -> int:
    head = _head()
    pending = list(AuditEvent.objects.filter(seq__isnull=True).order_by("id")
                   .only("id", "content_hash")[:SEAL_BATCH])
    previous, seq = head.link_hash, head.seq
    for event in pending:
        seq += 1
        event.seq, event.link_hash = seq, link_hash(previous, seq, event.content_hash)
        previous = event.link_hash
    if pending:
        table = AuditEvent._meta.db_table
        with connection.cursor() as cursor:  # one statement for the batch (a CASE per row is slower)
            cursor.execute(
                f"UPDATE {table} AS e SET seq = v.seq, link_hash = v.link FROM "
                "(SELECT unnest(%s::bigint[]) AS id, unnest(%s::bigint[]) AS seq, unnest(%s::text[]) AS link) AS v "
                "WHERE e.id = v.id",
                [[e.pk for e in pending], [e.seq for e in pending], [e.link_hash for e in pending]])
        AuditChainHead.objects.filter(pk=1).update(seq=seq, link_hash=previous)
    return len(pending)


def seal() -> int:
    """Link every committed event not yet in the chain, in the order written; returns how many. Its own
    transaction (never inside another: the head must be read as committed now)."""
    sealed = 0
    while True:
        n = run_in_transaction(_seal_batch)
        sealed += n
        if n < SEAL_BATCH:
            return sealed


def _seal_after_commit():
    """Once per transaction that wrote events: seal after it commits."""
    for _sids, func, _robust in connection.run_on_commit:
        if func is seal:
            return
    transaction.on_commit(seal)


def record(action: str, *, by, correction=None, decision=None, sweep_run=None, before=None, after=None,
           note: str = "") -> AuditEvent:
    """`by` is the acting user, or a process label (SWEEP, DISPATCHER)."""
    user = None if isinstance(by, str) else by
    label = (by if isinstance(by, str) else by.get_username())[:150]
    event = AuditEvent(
        at=timezone.now(), actor=user, actor_label=label, action=action, before=before or {}, after=after or {},
        note=note, sweep_run=sweep_run, decision=decision,
        **({"correction_id": correction} if isinstance(correction, int) else {"correction": correction}))
    event.content_hash = event_content_hash(event)
    event.save(force_insert=True)
    written_in_transaction()
    return event


def written_in_transaction():
    """Events were written in the current transaction (audit.record, or a sweep page's COPY): they are
    sealed after it commits; outside a transaction, now."""
    if connection.in_atomic_block:
        _seal_after_commit()
    else:
        seal()


@dataclass
class Verification:
    events: int
    first_broken_seq: int | None = None
    first_broken_id: int | None = None
    reason: str = ""
    unsealed: int = 0

    @property
    def ok(self) -> bool:
        return self.first_broken_seq is None and not self.reason


def verify_chain(*, batch: int = 5000, seal_first: bool = True) -> Verification:
    """Recompute every event's content hash and every link, in chain order. The first mismatch, gap or
    head disagreement is reported. With seal_first, events committed but not yet linked (a writer
    died between its commit and its seal) are linked first; nothing else is written."""
    if seal_first:
        seal()
    result = Verification(events=0)
    previous, expected_seq = CHAIN_START, 1
    redacted, named_by_erasure = {}, set()  # event id -> seq; ids that "erased" events name
    last_id = None
    qs = AuditEvent.objects.filter(seq__isnull=False).order_by("seq")
    after = 0
    while True:
        page = list(qs.filter(seq__gt=after)[:batch])
        if not page:
            break
        for event in page:
            why, broken_at = "", event.seq
            if event.seq != expected_seq:
                why, broken_at = f"link {expected_seq} is missing (next stored link is {event.seq})", expected_seq
            elif not event.redacted and event_content_hash(event) != event.content_hash:
                why = f"event {event.pk} (link {event.seq}) was changed after it was written"
            elif link_hash(previous, event.seq, event.content_hash) != event.link_hash:
                why = f"link {event.seq} (event {event.pk}) does not follow from the link before it"
            if why:
                result.first_broken_seq, result.first_broken_id, result.reason = broken_at, event.pk, why
                return result
            result.events += 1
            if event.redacted:
                redacted[event.pk] = event.seq
            if event.action == AuditEvent.Action.ERASED:
                named_by_erasure.update((event.after or {}).get("redacted_events") or [])
            previous, expected_seq, last_id = event.link_hash, event.seq + 1, event.pk
        after = page[-1].seq
    head = AuditChainHead.objects.filter(pk=1).first()
    head_seq, head_link = (head.seq, head.link_hash) if head else (0, CHAIN_START)
    if (head_seq, head_link) != (expected_seq - 1, previous):
        result.first_broken_seq = expected_seq
        result.reason = (f"the chain head says link {head_seq} but the stored chain ends at link {expected_seq - 1}"
                         f"{f' (event {last_id})' if last_id else ''}: events were deleted from its end")
    unexplained = sorted((seq, pk) for pk, seq in redacted.items() if pk not in named_by_erasure)
    if unexplained and result.ok:
        result.first_broken_seq, result.first_broken_id = unexplained[0]
        result.reason = (f"event {unexplained[0][1]} (link {unexplained[0][0]}) is marked erased but no "
                         f"erasure names it")
    result.unsealed = AuditEvent.objects.filter(seq__isnull=True).count()
    return result
