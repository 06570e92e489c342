"""One tamper-evident chain for every audited state change, whatever app records it.

    ChainedEvent                 abstract base of each app's audit event model (corrections.AuditEvent,
                                 worklist.WorkEvent, shelf.ShelfEvent, patients.DispensingChange)
    written(model, ids)          the current transaction wrote these events: sealed after it commits
    seal_rows([(model, id)])     link these committed events, in this order (the writer's job)
    seal_unsealed()              link every event left unsealed (the audited repair: manage.py seal_audit)

What a link proves. Each event declares its structure (what happened, who did it - the actor's user id
and label -, when, on which rows) and its redactable part (before/after values, notes, details that may
name a patient). Link `seq` (core.models.AuditLink) stores

    redactable_digest = HMAC(key, canonical JSON of the redactable part)
    link_hash         = HMAC(key, previous link_hash | seq | key id | table | row id
                                  | canonical JSON of the structure | redactable_digest)

The key is not in the database (settings.UNSAY_AUDIT_KEYS, from the environment), so someone who can
write the database but does not hold the key can neither forge a link nor recompute one after an edit.
An erasure blanks an event's redactable part and marks it `redacted`; the link keeps the digest of what
was there, so the event's structure and its place in the chain still verify (core.audit_verify).

Who seals. The writer, after its transaction commits, and only the events it wrote: a sweep page reads
one REPEATABLE READ snapshot, and a head advanced by another writer after it began can be neither read
nor locked there, so the link is written in its own READ COMMITTED transaction right after the commit
(locking the one head row). An event that is not the writer's own is never sealed on the way, so a row
inserted by hand stays unsealed, and verification reports it. An event whose writer died between its
commit and its seal is reported the same way until an operator seals it with `manage.py seal_audit`,
which records an event naming what it sealed.
"""

import hashlib
import hmac
import json
from datetime import date, datetime

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, models, transaction
from django.utils import timezone

from core.copy_rows import copy_rows
from core.models import AuditChainHead, AuditLink
from core.retry import run_in_transaction

CHAIN_START = "0" * 64
SEAL_BATCH = 5000


class ChainedEvent(models.Model):
    """An audited event: a link of the one chain once sealed (`seq` set when its link is written)."""

    # Attribute names (a relation's `<name>_id`) under the link hash for good, and those an erasure may
    # blank (their digest is kept by the link). Each subclass names its own.
    CHAIN_STRUCTURE: tuple[str, ...] = ()
    CHAIN_REDACTABLE: tuple[str, ...] = ()

    seq = models.BigIntegerField(null=True, blank=True, unique=True, editable=False)
    # The redactable part was erased on request: its digest stays in the link, and an erasure event names
    # this row (chain_redactions).
    redacted = models.BooleanField(default=False, db_default=False, editable=False)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        adding = self._state.adding
        super().save(*args, **kwargs)
        if adding:
            written(type(self), [self.pk])

    def chain_redactions(self) -> dict[str, list[int]]:
        """{table: row ids} of the events this event says an erasure redacted (an erasure's own event)."""
        return {}


def chained_models() -> dict[str, type[ChainedEvent]]:
    """{table: model} of every installed ChainedEvent."""
    return {m._meta.db_table: m for m in apps.get_models() if issubclass(m, ChainedEvent)}


# --- keys -----------------------------------------------------------------------------------------

def signing_key() -> tuple[str, bytes]:
    """(key id, key) new links are signed with."""
    key_id = settings.UNSAY_AUDIT_KEY_ID
    if not key_id or key_id not in settings.UNSAY_AUDIT_KEYS:
        raise ImproperlyConfigured("No audit chain key: set UNSAY_AUDIT_KEY (docs/operator.md, Audit chain).")
    return key_id, settings.UNSAY_AUDIT_KEYS[key_id]


def verifying_key(key_id: str) -> bytes | None:
    """The key a link names (the current one or a retired one), or None if this deployment lacks it."""
    return settings.UNSAY_AUDIT_KEYS.get(key_id)


# --- hashing --------------------------------------------------------------------------------------

def _plain(value):
    # Times as ISO 8601 (read back from the database, always UTC); ids, UUIDs, decimals as text.
    return value.isoformat() if isinstance(value, datetime | date) else str(value)


def canonical(values: dict) -> bytes:
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain).encode()


def _mac(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def structure_of(event, names) -> bytes:
    return canonical({name: getattr(event, name) for name in names})


def redactable_digest(key: bytes, event, names) -> str:
    return _mac(key, canonical({name: getattr(event, name) for name in names}))


def link_hash(key: bytes, *, previous: str, seq: int, key_id: str, table: str, row_id: int, structure: bytes,
              redactable: str) -> str:
    head = f"{previous}|{seq}|{key_id}|{table}|{row_id}|".encode()
    return _mac(key, head + structure + b"|" + redactable.encode())


def link_for(event, *, previous: str, seq: int, key_id: str, key: bytes, structure_names=None,
             redactable_names=None) -> AuditLink:
    """The link that seals `event` at `seq` (field names default to the event's model's; the migration
    that chained the first events passes its own frozen ones)."""
    structure_names = structure_names if structure_names is not None else event.CHAIN_STRUCTURE
    redactable_names = redactable_names if redactable_names is not None else event.CHAIN_REDACTABLE
    table = event._meta.db_table
    digest = redactable_digest(key, event, redactable_names)
    return AuditLink(seq=seq, event_table=table, event_id=event.pk, key_id=key_id, redactable_digest=digest,
                     link_hash=link_hash(key, previous=previous, seq=seq, key_id=key_id, table=table, row_id=event.pk,
                                         structure=structure_of(event, structure_names), redactable=digest))


# --- sealing --------------------------------------------------------------------------------------

def _head() -> AuditChainHead:
    """The chain head, locked for the rest of the transaction (created on first use)."""
    head = AuditChainHead.objects.select_for_update().filter(pk=1).first()
    if head is None:
        AuditChainHead.objects.bulk_create([AuditChainHead(pk=1, seq=0, link_hash=CHAIN_START)],
                                           ignore_conflicts=True)
        head = AuditChainHead.objects.select_for_update().get(pk=1)
    return head


def _set_seqs(model, events):
    if not events:
        return
    with connection.cursor() as cursor:  # one statement per table (a CASE per row is slower)
        cursor.execute(
            f"UPDATE {model._meta.db_table} AS e SET seq = v.seq FROM "
            "(SELECT unnest(%s::bigint[]) AS id, unnest(%s::bigint[]) AS seq) AS v WHERE e.id = v.id",
            [[e.pk for e in events], [e.seq for e in events]])


def _link(events: list, head: AuditChainHead) -> list:
    """Link `events` (committed, unsealed, in chain order) after `head`, locked by this transaction."""
    if not events:
        return []
    key_id, key = signing_key()
    previous, seq, links = head.link_hash, head.seq, []
    for event in events:
        seq += 1
        event.seq = seq
        link = link_for(event, previous=previous, seq=seq, key_id=key_id, key=key)
        links.append(link)
        previous = link.link_hash
    _insert_links(links)
    by_model: dict = {}
    for event in events:
        by_model.setdefault(event._meta.model, []).append(event)
    for model, rows in by_model.items():
        _set_seqs(model, rows)
    AuditChainHead.objects.filter(pk=1).update(seq=seq, link_hash=previous)
    return events


_LINK_COLUMNS = ("seq", "event_table", "event_id", "key_id", "redactable_digest", "link_hash", "sealed_at")


def _insert_links(links: list[AuditLink]):
    """Insert the links: COPY on PostgreSQL (a sweep page seals a thousand at once, and the ORM's
    INSERT of as many rows costs more than computing them), the ORM elsewhere."""
    if connection.vendor != "postgresql":
        AuditLink.objects.bulk_create(links)
        return
    now = timezone.now()
    for link in links:
        link.sealed_at = now
    # Errors as Django's (a unique violation is an IntegrityError, which seal_rows retries).
    with connection.cursor() as cursor, connection.wrap_database_errors:
        copy_rows(cursor.cursor, AuditLink, _LINK_COLUMNS,
                  [tuple(getattr(link, column) for column in _LINK_COLUMNS) for link in links], with_id=True)


def _seal_batch(pairs: list[tuple[type, int]]) -> int:
    ids: dict = {}
    for model, pk in pairs:
        ids.setdefault(model, []).append(pk)
    # Read before the head is locked, so the lock is held only for the writes. Only the repair
    # (seal_unsealed) could link one of these rows meanwhile: the second link then violates
    # auditlink_one_per_event and seal_rows retries, reading the row as sealed.
    found = {(model, e.pk): e for model, pks in ids.items() for e in _unsealed_of(model, pks)}
    events = [found[pair] for pair in pairs if pair in found]
    return len(_link(events, _head())) if events else 0


class _Sealing:
    """What a link reads of one committed event: its id and the values its chain names list, read as the
    model reads them (values_list applies each field's conversion, JSON included), so the link is the one
    link_for makes of the model instance. A sweep page seals a thousand events at once; building each as
    a model instance (every column, JSON parsed twice over) cost more than hashing it."""

    __slots__ = ("_meta", "pk", "seq", "CHAIN_STRUCTURE", "CHAIN_REDACTABLE", "_values")

    def __init__(self, model, pk, values: dict):
        self._meta, self.pk, self.seq, self._values = model._meta, pk, None, values
        self.CHAIN_STRUCTURE, self.CHAIN_REDACTABLE = model.CHAIN_STRUCTURE, model.CHAIN_REDACTABLE

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None


def _unsealed_of(model, pks) -> list[_Sealing]:
    names = list(dict.fromkeys((*model.CHAIN_STRUCTURE, *model.CHAIN_REDACTABLE)))
    # By primary key alone, the sealed ones skipped here: with `seq IS NULL` in the query, reading a
    # sweep page's thousand events took about 0.1 s (the seq index keeps an entry for every event's
    # unsealed version until a vacuum, and the planner could go through it); by key, under 15 ms.
    rows = model.objects.filter(pk__in=pks).values_list("pk", "seq", *names)
    return [_Sealing(model, pk, dict(zip(names, values, strict=True))) for pk, seq, *values in rows if seq is None]


def seal_rows(pairs) -> int:
    """Link these committed events (model, id), in this order, skipping any already linked or gone (rolled
    back); returns how many were linked. Its own transaction: the head must be read as committed now."""
    pairs, sealed = list(dict.fromkeys(pairs)), 0
    for start in range(0, len(pairs), SEAL_BATCH):
        batch = pairs[start:start + SEAL_BATCH]
        if connection.in_atomic_block:  # a test running on-commit callbacks inside its own transaction
            with transaction.atomic():
                sealed += _seal_batch(batch)
        else:
            sealed += run_in_transaction(_seal_batch, batch, retry_unique_violations=True)
    return sealed


class SealAfterCommit:
    """The events one transaction wrote, sealed once after it commits."""

    def __init__(self):
        self.pairs: list[tuple[type, int]] = []

    def __call__(self):
        seal_rows(self.pairs)


def written(model, ids):
    """The current transaction wrote these events (ChainedEvent.save calls this; bulk writers call it with
    their ids): they are sealed after it commits; outside a transaction, now."""
    pairs = [(model, pk) for pk in ids]
    if not connection.in_atomic_block:
        seal_rows(pairs)
        return
    for _sids, func, _robust in connection.run_on_commit:
        if isinstance(func, SealAfterCommit):
            func.pairs.extend(pairs)
            return
    pending = SealAfterCommit()
    pending.pairs.extend(pairs)
    transaction.on_commit(pending)


def unsealed() -> list:
    """Every committed event not in the chain, oldest first (time, then table and id)."""
    rows = [e for model in chained_models().values() for e in model.objects.filter(seq__isnull=True)]
    return sorted(rows, key=lambda e: (e.at, e._meta.db_table, e.pk))


def seal_unsealed() -> dict[str, list[int]]:
    """Link every unsealed event (the repair after a writer died between commit and seal); runs in the
    caller's transaction, which should also record what was sealed. Returns {table: ids}."""
    sealed: dict[str, list[int]] = {}
    with transaction.atomic():
        head = _head()
        for event in _link(unsealed(), head):
            sealed.setdefault(event._meta.db_table, []).append(event.pk)
    return sealed


def head() -> tuple[int, str]:
    """(seq, link hash) of the chain's last link."""
    row = AuditChainHead.objects.filter(pk=1).first()
    return (row.seq, row.link_hash) if row else (0, CHAIN_START)
