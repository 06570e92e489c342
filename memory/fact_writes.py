"""The fact store's write path: claims become versions (asserted, retracted, superseded) in one transaction,
and supersessions are announced after commit. A version is written without its vector: the embedding
stage (memory.vectors) adds it after commit, and nothing that decides waits for it (docs/adr/0017).
Reads are memory.retrieval, decisions memory.decisions; other apps use these modules and never
memory's tables directly. The rows this path reads and the statements it sends are memory.write_statements.

Writing facts (here)
    assert_claim(claim) / assert_claims([claims])  -> AssertResult(s)
    retract_claim(fact_key, reason=..., by=...)     -> Fact | None
    prepare_claims + write_claims / retract_in_transaction: the same, several in ONE caller transaction
Superseding decisions (here; recording them is memory.decisions)
    supersede_standing(ids, at=...)                 -> int  (a set of standing decisions, one UPDATE)

Every multi-statement write runs through core.retry.run_in_transaction.
"""

import hashlib
import json
from dataclasses import dataclass, field
from datetime import date, datetime

from django.db import connection, transaction
from django.utils import timezone

from core.retry import retry_conflicts, run_in_transaction
from drugs import recall_terms
from drugs.scopes import claim_ndc_products, fact_scopes
from memory.models import Decision, Fact
from memory.signals import facts_changed
from memory.write_statements import (
    FACT_NAMES,
    believed_facts,
    fact_from_row,
    missing_write_statements,
    prepared_ok,
    prepared_unknown,
    rows_of,
)


@dataclass
class Claim:
    fact_key: str
    kind: str
    subject: str
    statement: str
    source: str
    attributes: dict = field(default_factory=dict)
    lot: str | None = None
    source_ref: str = ""
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    asserted_by: str = ""
    # Set by a kind of claim when built (recalls.ingest.RecallClaim), so the write calls none of its code: its
    # content hash ("": the hash below), unsaved rows of its own app the fact refers to (inserted if
    # absent, by primary key, in the facts' transaction when the fact is written).
    digest: str = field(default="", repr=False, compare=False)
    shared_rows: tuple = field(default=(), repr=False, compare=False)

    def content_hash(self) -> str:
        """Hash of the canonical content. Source and provenance are not content: the same claim
        re-read from another snapshot is the same belief."""
        if self.digest:
            return self.digest
        canonical = json.dumps(
            {
                "kind": self.kind,
                "subject": self.subject,
                "lot": self.lot or None,
                "statement": self.statement,
                "attributes": self.attributes,
                "valid_from": _iso(self.valid_from),
                "valid_to": _iso(self.valid_to),
            },
            sort_keys=True,
            separators=(",", ":"),
            default=str,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    def scopes(self) -> list[str]:
        """What this fact can touch (drugs.scopes); derived from hashed content, so not hashed itself."""
        if self.kind not in ("recall", "label"):
            return []
        return fact_scopes(self.subject, self.lot or None, claim_ndc_products(self.attributes),
                           recall_terms.product_names(self) if self.kind == "recall" else ())


@dataclass
class AssertResult:
    status: str  # "created" (first version), "versioned" (new version, old retracted), "unchanged"
    fact: Fact
    previous: Fact | None = None

    @property
    def wrote(self) -> bool:
        return self.status != "unchanged"


def _iso(value):
    if value is None:
        return None
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


def assert_claim(claim: Claim, *, at: datetime | None = None, reason: str = "") -> AssertResult:
    """Assert one claim. Identical content to the believed version writes nothing."""
    return assert_claims([claim], at=at, reason=reason)[0]


def assert_claims(claims: list[Claim], *, at: datetime | None = None, reason: str = "",
                  on_result=None) -> list[AssertResult]:
    """Assert many claims: one query finds which changed, then each changed claim commits (or fails) in
    its own retried transaction."""
    # Only on an autocommit connection: _write_alone's own BEGIN/COMMIT must not end a caller's transaction.
    alone = connection.vendor == "postgresql" and not connection.in_atomic_block and connection.get_autocommit()
    alone = alone and not any(c.shared_rows for c in claims)  # their rows join the facts' transaction
    if alone and len(claims) == 1:
        # One claim needs no separate look at what we believe: the write's locking read is that look
        # (two round trips for a new version, not three).
        results = [_write_alone(PreparedClaims(claims, [claims[0].content_hash()], {}, [0]), 0, at, reason)]
    else:
        prepared = prepare_claims(claims)
        results = list(prepared.unchanged.get(i) for i in range(len(claims)))
        for i in prepared.pending:
            if alone:
                results[i] = _write_alone(prepared, i, at, reason)
            else:
                results[i] = run_in_transaction(
                    lambda i=i: write_claims(prepared, [i], at=at, reason=reason)[0], retry_unique_violations=True
                )
    if on_result:
        for r in results:
            on_result(r)
    return results


def _write_shared(prepared: "PreparedClaims", indexes) -> None:
    """The shared rows of the claims about to be written (not the unchanged): one insert-if-absent per model."""
    rows = {(type(row), row.pk): row for i in indexes for row in prepared.claims[i].shared_rows}
    for model in dict.fromkeys(model for model, _pk in rows):
        model._default_manager.bulk_create([r for (m, _pk), r in rows.items() if m is model], ignore_conflicts=True)


def _write_alone(prepared: "PreparedClaims", i: int, at, reason) -> AssertResult:
    """One claim in a transaction of its own (PostgreSQL, autocommit connection): `_write_versions`
    with BEGIN riding in its first message and COMMIT in its last, so a new version costs two round
    trips instead of four. Retried by the same loop as core.retry.run_in_transaction
    (retry_unique_violations=True); a failed attempt is rolled back before the next."""
    return retry_conflicts(lambda: _write_versions(prepared, [i], at, reason, own_transaction=True)[0],
                           retry_unique_violations=True)


@dataclass
class PreparedClaims:
    """Claims checked against what we believe, ready to write: the unchanged (their results) and the
    pending (indexes of the changed, or of a lone claim not yet compared: its locking read compares it)."""

    claims: list[Claim]
    hashes: list[str]
    unchanged: dict[int, AssertResult]
    pending: list[int]


def prepare_claims(claims: list[Claim]) -> PreparedClaims:
    """One query for the believed versions: which claims changed (pending) and which did not."""
    hashes = [c.content_hash() for c in claims]
    believed = {f.fact_key: f for f in believed_facts({c.fact_key for c in claims})}
    unchanged, pending = {}, []
    for i, (claim, digest) in enumerate(zip(claims, hashes, strict=True)):
        current = believed.get(claim.fact_key)
        if current is not None and current.content_hash == digest:
            unchanged[i] = AssertResult("unchanged", current)
        else:
            pending.append(i)
    return PreparedClaims(claims, hashes, unchanged, pending)


def write_claims(prepared: PreparedClaims, indexes, *, at: datetime | None = None,
                 reason: str = "") -> list[AssertResult]:
    """Write the prepared claims at `indexes` inside the caller's transaction, so a caller can make
    several claims and retractions (one recall record) commit or fail together. Wrap the outermost
    transaction in core.retry.run_in_transaction(..., retry_unique_violations=True).

    On PostgreSQL the changed claims are written as a set (`_write_versions`: advisory locks in key
    order, one locking read, one INSERT ... SELECT), in rounds when a key is named more than once, so
    each round sees the version the one before wrote. CockroachDB (no advisory locks; SERIALIZABLE
    and 40001 retries order the writers there) writes them one by one (`_write_version`)."""
    if not connection.in_atomic_block:
        raise RuntimeError("write_claims must run inside a transaction (see run_in_transaction).")
    indexes = list(indexes)
    _write_shared(prepared, [i for i in indexes if i not in prepared.unchanged])
    if connection.vendor != "postgresql":
        return [prepared.unchanged[i] if i in prepared.unchanged
                else _write_version(prepared.claims[i], prepared.hashes[i], at, reason)
                for i in indexes]
    results = {pos: prepared.unchanged[i] for pos, i in enumerate(indexes) if i in prepared.unchanged}
    todo = [(pos, i) for pos, i in enumerate(indexes) if i not in prepared.unchanged]
    while todo:
        this_round, later, keys = [], [], set()
        for pos, i in todo:
            key = prepared.claims[i].fact_key
            (later if key in keys else this_round).append((pos, i))
            keys.add(key)
        written = _write_versions(prepared, [i for _, i in this_round], at, reason)
        results.update(zip([pos for pos, _ in this_round], written, strict=True))
        todo = later
    return [results[pos] for pos in range(len(indexes))]


def _write_versions(prepared: PreparedClaims, indexes: list[int], at, reason, *,
                    own_transaction: bool = False) -> list[AssertResult]:
    """_write_version for claims of distinct keys, as a set (PostgreSQL): the same rows, the same
    checks, in two round trips whatever the number of claims (locks + locking read; retirements +
    inserts). Each round trip sends several EXECUTEs of WRITE_STATEMENTS in one simple-protocol message
    (Django's client-side binding); under READ COMMITTED each statement still takes its own snapshot.
    own_transaction (an autocommit connection, see _write_alone): BEGIN and COMMIT ride in the first
    and last message, and anything that fails in between is rolled back here."""
    try:
        if not own_transaction:
            return _write_versions_sent(prepared, indexes, at, reason, "", "")
        return _write_versions_sent(prepared, indexes, at, reason, "BEGIN;", ";COMMIT")
    except BaseException:
        prepared_unknown()
        if not own_transaction:
            raise
        raw = connection.connection
        if raw is not None and raw.info.transaction_status.name != "IDLE":
            with connection.cursor() as cursor:
                cursor.execute("ROLLBACK")
        raise


def _write_versions_sent(prepared: PreparedClaims, indexes: list[int], at, reason, begin: str,
                         commit: str) -> list[AssertResult]:
    claims = [prepared.claims[i] for i in indexes]
    keys = [c.fact_key for c in claims]
    with connection.cursor() as cursor:
        # Writers of one key queue on its advisory lock for the rest of their transaction (see
        # _lock_believed). Taken in one fixed order, so two batches sharing keys cannot deadlock.
        # The second statement starts after the locks: every other writer of these keys has committed,
        # so it sees their versions (no re-check loop needed, unlike a writer without the advisory lock).
        # The floor of a key with nothing believed is its last retraction: a re-asserted key's new
        # belief must not start before the last one ended. Each key also draws its new version's id
        # here, so a retirement can name its successor in the same UPDATE (no FK checks it: memory.models
        # HISTORY_REFERENCE).
        # plan_cache_mode touches only prepared statements, so in a caller's transaction (write_claims)
        # it lasting until that transaction ends changes nothing else.
        cursor.execute(missing_write_statements(cursor) + begin + "SET LOCAL plan_cache_mode TO force_generic_plan;"
                       " EXECUTE unsay_fact_lock(%s::text[]); EXECUTE unsay_fact_locking_read(%s::text[])",
                       [keys, keys])
        prepared_ok()
        current = {row[0]: (row[1], row[2], row[3:] if row[3] is not None else None) for row in rows_of(cursor)[-1]}
        plan, retire, rows = [], [], []
        id_at = FACT_NAMES.index("id")
        hash_at, asserted_at = FACT_NAMES.index("content_hash"), FACT_NAMES.index("asserted_at")
        for ord_, (i, claim) in enumerate(zip(indexes, claims, strict=True)):
            new_id, last_retracted, believed = current[claim.fact_key]
            digest = prepared.hashes[i]
            if believed is not None and believed[hash_at] == digest:
                plan.append(("unchanged", fact_from_row(believed), None))
                continue
            previous_id = believed[id_at] if believed is not None else None
            # Taken after the lock: a writer that queued behind others must not retract their version
            # at an instant before it was asserted.
            now = _belief_instant(at, believed[asserted_at] if believed is not None else last_retracted,
                                  claim.fact_key)
            plan.append(("versioned" if previous_id is not None else "created", previous_id, new_id))
            if previous_id is not None:
                retire.append({"id": previous_id, "new_id": new_id, "at": now.isoformat(),
                               "retired_by": claim.asserted_by or claim.source,
                               "why": reason or "superseded by a new version"})
            rows.append({
                "ord": ord_, "id": new_id, "fact_key": claim.fact_key, "kind": claim.kind, "subject": claim.subject,
                "lot": claim.lot or None, "statement": claim.statement,
                "attributes": json.dumps(claim.attributes, sort_keys=True, default=str), "content_hash": digest,
                "source": claim.source, "source_ref": claim.source_ref,
                "valid_from": _iso(claim.valid_from), "valid_to": _iso(claim.valid_to),
                "asserted_at": now.isoformat(),
                "asserted_by": claim.asserted_by,
                "scopes": claim.scopes(),
            })
        written = {}
        if rows:
            # Retire first (fact_one_believed_per_key), then insert, in one message. The version number is
            # computed by the database inside the INSERT, never read-then-written here; a concurrent insert
            # of the same number hits fact_key_version_unique and the transaction retries.
            cursor.execute(("EXECUTE unsay_fact_retire(%s::jsonb);" if retire else "")
                           + "EXECUTE unsay_fact_insert(%s::jsonb)" + commit,
                           ([json.dumps(retire)] if retire else []) + [json.dumps(rows)])
            for row_set in rows_of(cursor):
                for row in row_set:
                    written[row[id_at]] = fact_from_row(row)
        elif commit:
            # Nothing written, only locks taken: a rollback ends it without the WAL flush that committing
            # the row lock's transaction id would wait for.
            cursor.execute("ROLLBACK")
    out = []
    for status, previous, new_id in plan:
        if status == "unchanged":
            out.append(AssertResult("unchanged", previous))
            continue
        fact, previous = written[new_id], written.get(previous) if previous else None
        _notify_superseded(previous, fact)
        out.append(AssertResult(status, fact, previous))
    return out


def _write_version(claim: Claim, digest: str, at, reason) -> AssertResult:
    with connection.cursor() as cursor:
        row = _lock_believed(cursor, claim.fact_key)
        if row and row[1] == digest:
            return AssertResult("unchanged", Fact.objects.defer("embedding").get(pk=row[0]))
        previous_id = row[0] if row else None
        # Taken after the lock: a writer that queued behind others must not retract their version
        # at an instant before it was asserted.
        if row:
            floor = row[2]
        else:
            # A retracted key re-asserted: its new belief must not start before the last one ended.
            cursor.execute("SELECT MAX(retracted_at) FROM memory_fact WHERE fact_key = %s", [claim.fact_key])
            floor = cursor.fetchone()[0]
        now = _belief_instant(at, floor, claim.fact_key)
        if previous_id:
            cursor.execute(
                "UPDATE memory_fact SET retracted_at = %s, retracted_by = %s, retraction_reason = %s WHERE id = %s",
                [now, claim.asserted_by or claim.source, reason or "superseded by a new version", previous_id],
            )
        # The version number is computed by the database inside the INSERT, never read-then-written here;
        # a concurrent insert of the same number hits fact_key_version_unique and the transaction retries.
        cursor.execute(
            """
            INSERT INTO memory_fact (fact_key, version, kind, subject, lot, statement, attributes, content_hash,
                                     source, source_ref, valid_from, valid_to, asserted_at, asserted_by,
                                     retracted_by, retraction_reason, scopes)
            SELECT %s, COALESCE(MAX(version), 0) + 1, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '', '', %s
            FROM memory_fact WHERE fact_key = %s
            RETURNING id
            """,
            [claim.fact_key, claim.kind, claim.subject, claim.lot or None, claim.statement,
             json.dumps(claim.attributes, sort_keys=True, default=str), digest, claim.source, claim.source_ref,
             claim.valid_from, claim.valid_to, now, claim.asserted_by, claim.scopes(),
             claim.fact_key],
        )
        new_id = cursor.fetchone()[0]
        if previous_id:
            cursor.execute("UPDATE memory_fact SET superseded_by_id = %s WHERE id = %s", [new_id, previous_id])
    fact = Fact.objects.defer("embedding").get(pk=new_id)
    previous = Fact.objects.defer("embedding").get(pk=previous_id) if previous_id else None
    _notify_superseded(previous, fact)
    return AssertResult("versioned" if previous else "created", fact, previous)


def _lock_believed(cursor, fact_key: str):
    """Lock and return (id, content_hash, asserted_at) of the believed version of `fact_key`, or None.

    A racing writer blocks on the row lock; when the holder commits, READ COMMITTED re-checks the
    row, finds it retracted and returns nothing. Each new statement takes a fresh snapshot, so we
    look again and queue behind the successor instead of failing the whole transaction: under
    contention a writer waits its turn rather than burning its retry budget.
    """
    if connection.vendor == "postgresql":
        # Writers of one key queue here for the rest of their transaction. Without it, writers creating
        # a key's first version race on two unique indexes at once and can deadlock; the constraints
        # stay the safety net. CockroachDB has no advisory locks: SERIALIZABLE + 40001 retries do this there.
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["memory_fact:" + fact_key])
    for _ in range(1000):
        cursor.execute(
            "SELECT id, content_hash, asserted_at FROM memory_fact"
            " WHERE fact_key = %s AND retracted_at IS NULL FOR UPDATE",
            [fact_key],
        )
        row = cursor.fetchone()
        if row is not None:
            return row
        cursor.execute("SELECT 1 FROM memory_fact WHERE fact_key = %s AND retracted_at IS NULL", [fact_key])
        if cursor.fetchone() is None:
            return None  # nothing believed: a first version, or the key was retracted
    raise RuntimeError(f"Could not lock the believed version of {fact_key!r}: it kept changing.")


def _belief_instant(at: datetime | None, floor: datetime | None, fact_key: str) -> datetime:
    """The instant a belief change takes effect. `floor` is the key's latest belief change (the believed
    version's assertion, or the last retraction). An explicit `at` before it is refused: belief time must
    not run backwards, or two versions would have been believed at once. The clock default never precedes it."""
    if at is not None:
        if floor is not None and at < floor:
            raise ValueError(
                f"Cannot change {fact_key!r} at {at.isoformat()}: its belief last changed later, "
                f"at {floor.isoformat()}.")
        return at
    now = timezone.now()
    return max(now, floor) if floor is not None else now


def retract_claim(fact_key: str, *, reason: str, by: str = "", at: datetime | None = None) -> Fact | None:
    """Retract the believed version of `fact_key` with no successor. Returns it, or None if nothing was believed."""
    if not reason:
        raise ValueError("A retraction needs a reason.")
    return run_in_transaction(retract_in_transaction, fact_key, reason=reason, by=by, at=at)


def retract_in_transaction(fact_key: str, *, reason: str, by: str = "", at: datetime | None = None) -> Fact | None:
    """retract_claim inside the caller's transaction (see write_claims)."""
    if not reason:
        raise ValueError("A retraction needs a reason.")
    if not connection.in_atomic_block:
        raise RuntimeError("retract_in_transaction must run inside a transaction.")
    with connection.cursor() as cursor:
        row = _lock_believed(cursor, fact_key)
    if row is None:
        return None
    now = _belief_instant(at, row[2], fact_key)
    fact = Fact.objects.defer("embedding").get(pk=row[0])
    fact.retracted_at = now
    fact.retracted_by = by
    fact.retraction_reason = reason
    fact.save(update_fields=["retracted_at", "retracted_by", "retraction_reason"])
    _notify_superseded(fact, None)
    return fact


def _notify_superseded(old: Fact | None, new: Fact | None):
    """Announce a retraction (old, new-or-None) or, for a brand-new key, a creation (None, new):
    a new fact can break a standing decision's premise just as a retraction breaks a read."""
    if old is None and new is None:
        return
    pair = (old.id if old else None, new.id if new else None)
    if connection.in_atomic_block:
        _supersessions_of_this_transaction().append(pair)
    else:  # autocommit: the write has already committed
        _SupersessionBatch([pair])()


class _SupersessionBatch:
    """An on_commit callback carrying the transaction's supersessions, sent as memory.signals.facts_changed.
    Django drops it on rollback (and with a rolled-back savepoint it was registered in), so a
    retraction that did not commit is never announced. The transaction's one batch is found among its
    on_commit callbacks: Django keeps no other per-transaction state we could hang it on."""

    def __init__(self, pairs=None):
        self.pairs = pairs or []

    def __call__(self):
        if self.pairs:
            facts_changed.send(sender=Fact, pairs=list(self.pairs))


def _supersessions_of_this_transaction() -> list:
    for _savepoints, callback, _robust in connection.run_on_commit:
        if isinstance(callback, _SupersessionBatch):
            return callback.pairs
    batch = _SupersessionBatch()
    transaction.on_commit(batch)
    return batch.pairs


def supersede_standing(decision_ids, *, at: datetime) -> int:
    """Mark these decisions superseded at `at`, in the caller's transaction: one UPDATE guarded by
    `status = 'standing'`, so a decision another writer superseded first is left alone and the count
    says so (a caller that needs all of them compares it with len(ids) and rolls back). The one
    write of Decision.status besides record_decision's replacement of a single decision."""
    return Decision.objects.filter(id__in=list(decision_ids), status=Decision.Status.STANDING).update(
        status=Decision.Status.SUPERSEDED, superseded_at=at)
