"""The per-kind ingesters: a chunk of openFDA records turned into believed facts. A record is parsed
(recalls.ingest) before anything is written, a malformed one quarantined with its reason
(recalls.quarantine); a valid record's new versions, the retraction of its dropped lots and its
RecallRecord (the change-detection hash) commit in one retried transaction (memory.fact_writes), a group of
records at a time. The run around them (chunks, threads, progress) is recalls.services."""

import hashlib
import logging
from dataclasses import dataclass
from datetime import date
from typing import NamedTuple

from django.db.models import Q

from core.retry import run_in_transaction
from drugs import recall_terms
from memory.fact_writes import (
    assert_claims,
    prepare_claims,
    retract_claim,
    retract_in_transaction,
    write_claims,
)
from memory.models import Fact

from . import quarantine
from .ingest import label_claims, parse_enforcement, recall_claims
from .models import IngestRun, RecallRecord
from .record_fields import Malformed, record_hash, unstorable_text
from .record_identity import IDENTITY_VERSION

log = logging.getLogger(__name__)

# Records committed together: their writes share one commit, and what a commit sets off (shelf
# matching and the sweep trigger, receivers of memory.signals.facts_changed) runs once for them. Each
# record is still all or nothing: a group that fails is rolled back whole and written record by record.
RECORDS_PER_TRANSACTION = 20


@dataclass
class Tally:
    """Counts from one chunk; the caller adds them to the IngestRun (chunks may run in threads)."""

    fetched: int = 0
    new_facts: int = 0
    new_versions: int = 0
    retracted: int = 0
    unchanged: int = 0
    quarantined: int = 0
    older_than_believed: int = 0

    COUNTERS = ("fetched", "new_facts", "new_versions", "retracted", "unchanged", "quarantined",
                "older_than_believed")

    def add_to(self, run):
        for name in self.COUNTERS:
            setattr(run, name, getattr(run, name) + getattr(self, name))


def _quarantine(run, tally, raw, reason):
    """Keep the record and the reason (once per record and source: recalls.quarantine) and count it."""
    quarantine.keep(run, raw, reason)
    tally.quarantined += 1


def _parse_or_quarantine(parse, run, tally, raw):
    """parse(raw), or None after quarantining the record: Malformed with its own reason, anything else
    (a bug the input found) with the exception, so one record can never stop the chunk."""
    try:
        return parse(raw)
    except Malformed as exc:
        _quarantine(run, tally, raw, str(exc))
    except Exception as exc:
        log.exception("unexpected error validating a record; quarantined")
        _quarantine(run, tally, raw, f"could not be validated: {type(exc).__name__}: {exc}")
    return None


def _tally(run, results):
    for result in results:
        if result.status == "created":
            run.new_facts += 1
        elif result.status == "versioned":
            run.new_versions += 1


def another_record(parsed, first_event: str) -> None:
    """FDA has published more than one record under this recall number (real data holds several: other
    firms, other products). None is lost: this one keeps the number its patients and pharmacists know,
    becomes its own record, told apart by its event id (or, within one event, its product), and is
    flagged for a person."""
    event = str(parsed.attributes.get("event_id") or "")
    if event and event != first_event:
        parsed.record = f"e{event}"
    else:
        parsed.record = "p" + hashlib.sha256(parsed.attributes.get("product_description", "").encode()).hexdigest()[:10]
    parsed.attributes["record_flag"] = (f"recall number {parsed.recall_number} is also used by another record in "
                                        f"the same snapshot; kept as its own record ({parsed.record})")


class _ChangedRecord(NamedTuple):
    """A record of the chunk to write: its claims are prepared[indexes] of the chunk's prepare_claims."""

    parsed: object
    claims: list
    subject: str
    derived: tuple  # (ndcs, identity)
    indexes: range

    @property
    def believed_after(self) -> list[tuple[str, str | None]]:
        """(fact_key, lot) believed under the record's key once it is written."""
        return [(c.fact_key, c.lot) for c in self.claims]


class RecallIngester:
    def __init__(self, run: IngestRun, snapshot_updated: date | None = None):
        self.run = run
        # recall_number -> (id, hash, event_id) of its first record in the source
        self.first: dict[str, tuple[int, str, str]] = {}
        self.by = f"ingest:run:{run.pk}"
        self.ref = run.snapshot_location or run.source_ref
        self.snapshot_updated = snapshot_updated

    def prepare(self, records):
        """Note each recall number's first record, so duplicates are judged the same way whatever the
        chunk order (chunks may run in threads)."""
        for raw in records:
            if isinstance(raw, dict) and isinstance(raw.get("recall_number"), str):
                try:
                    self.first.setdefault(raw["recall_number"].strip(),
                                          (id(raw), record_hash(raw), str(raw.get("event_id") or "")))
                except Exception:  # unhashable junk: parse_enforcement quarantines it with the reason
                    continue

    def _older_than_believed(self, parsed, state) -> bool:
        """An older snapshot (or an older report of the record) must never supersede newer belief:
        re-ingesting an archived file would otherwise walk statuses backwards and re-draft corrections."""
        if state is None:
            return False
        if self.snapshot_updated and state.snapshot_updated and self.snapshot_updated < state.snapshot_updated:
            return True
        reported = parsed.attributes.get("report_date")
        return bool(reported and state.report_date and date.fromisoformat(reported) < state.report_date)

    def _unchanged_at_sight(self, raw, held: dict) -> bool:
        """True for the snapshot's first record of a recall whose stored hash and identity derivation
        match: its facts cannot change, so it is counted unchanged without being parsed (a no-op
        re-ingest costs one hash per record). Anything else - a duplicate, junk, a new or changed
        record - takes the full path, which validates and quarantines as before."""
        if not isinstance(raw, dict) or not isinstance(raw.get("recall_number"), str):
            return False
        number = raw["recall_number"].strip()
        first = self.first.get(number)
        if first is None or first[0] != id(raw):
            return False
        return held.get(number) == (first[1], IDENTITY_VERSION)

    def ingest_chunk(self, records) -> Tally:
        run = Tally()
        numbers = {raw["recall_number"].strip() for raw in records
                   if isinstance(raw, dict) and isinstance(raw.get("recall_number"), str)
                   and unstorable_text(raw["recall_number"]) is None}  # NUL or a lone surrogate: parse quarantines it
        held = {number: (digest, version) for number, digest, version in RecallRecord.objects.filter(
            recall_number__in=numbers).values_list("recall_number", "record_hash", "identity_version")}
        prepared = []
        for raw in records:
            run.fetched += 1
            if self._unchanged_at_sight(raw, held):
                run.unchanged += 1
                continue
            parsed = _parse_or_quarantine(parse_enforcement, self.run, run, raw)
            if parsed is None:
                continue
            first_id, first_hash, first_event = self.first.get(parsed.recall_number,
                                                               (id(raw), parsed.record_hash, ""))
            if first_id != id(raw):
                if first_hash == parsed.record_hash:
                    run.unchanged += 1
                    continue
                another_record(parsed, first_event)
            prepared.append(parsed)
        states = {s.recall_number: s for s in RecallRecord.objects.filter(
            recall_number__in=[p.record_key for p in prepared])}
        changed = []
        for parsed in prepared:
            state = states.get(parsed.record_key)
            current = state is not None and state.identity_version == IDENTITY_VERSION
            if current and state.record_hash == parsed.record_hash:
                run.unchanged += 1
                continue
            if self._older_than_believed(parsed, state):
                run.older_than_believed += 1
                continue
            # openFDA-derived identity is fixed at first sight (see RecallRecord), and re-derived once
            # when the derivation itself changes (IDENTITY_VERSION).
            subject, ndcs, identity = ((state.subject, state.ndcs, state.identity) if current
                                       else (parsed.subject, parsed.ndcs, parsed.identity))
            changed.append((parsed, recall_claims(parsed, subject=subject, ndcs=ndcs, identity=identity,
                                                  source_ref=self.ref, asserted_by=self.by),
                            subject, (ndcs, identity)))
        if not changed:
            return run
        believed_under = self._believed_under([parsed for parsed, _, _, _ in changed])
        try:
            # One believed-version query for the whole chunk.
            prepared = prepare_claims([c for _, claims, _, _ in changed for c in claims])
        except Exception:
            log.exception("preparing the chunk failed; preparing record by record to isolate the bad one")
            prepared = None
        items, offset = [], 0
        for parsed, claims, subject, derived in changed:
            items.append(_ChangedRecord(parsed, claims, subject, derived, range(offset, offset + len(claims))))
            offset += len(claims)
        size = RECORDS_PER_TRANSACTION if prepared is not None else 1  # unprepared: each record alone
        for start in range(0, len(items), size):
            group = items[start:start + size]
            if len(group) > 1:
                try:
                    written = run_in_transaction(self._write_group, prepared, group, believed_under,
                                                 retry_unique_violations=True)
                except Exception as exc:  # one record's refusal aborts the group: isolate it below
                    log.info("a group of %d records was refused (%s); writing them one by one", len(group),
                             type(exc).__name__)
                else:
                    for item, (mine, retracted) in zip(group, written, strict=True):
                        self._count(run, item, mine, retracted, believed_under)
                    continue
            for item in group:
                self._write_alone(run, prepared, item, believed_under)
        return run

    def _write_group(self, prepared, group, believed_under):
        """Several records' _write_record in one transaction. What each finds believed under its key
        includes what an earlier record of the group wrote there (believed_under is updated only after
        the commit, so a retried or refused group leaves it as it was)."""
        written, under = [], {}
        for item in group:
            key = item.parsed.record_key
            believed = under.get(key, believed_under.get(key, ()))
            written.append(self._write_record(prepared, item.indexes, item, believed))
            under[key] = item.believed_after
        return written

    def _write_alone(self, run, prepared, item, believed_under):
        """One record in its own transaction; a database refusal quarantines it and the run goes on."""
        try:
            if prepared is None:  # the chunk could not be prepared: this record on its own
                own, own_indexes = prepare_claims(item.claims), range(len(item.claims))
            else:
                own, own_indexes = prepared, item.indexes
            mine, retracted = run_in_transaction(self._write_record, own, own_indexes, item,
                                                 believed_under.get(item.parsed.record_key, ()),
                                                 retry_unique_violations=True)
        except Exception as exc:  # a database refusal for this record only; the run goes on
            log.exception("recall %s failed", item.parsed.recall_number)
            _quarantine(self.run, run, item.parsed.raw, f"could not be written: {type(exc).__name__}: {exc}")
            return
        self._count(run, item, mine, retracted, believed_under)

    @staticmethod
    def _count(run, item, mine, retracted, believed_under):
        _tally(run, mine)
        run.retracted += retracted
        if not retracted and all(r.status == "unchanged" for r in mine):
            run.unchanged += 1
        # What is believed under this record's key now, should the chunk hold its key again.
        believed_under[item.parsed.record_key] = item.believed_after

    def _write_record(self, prepared, indexes, item, believed):
        """One record's new versions (prepared[indexes]), retractions of its dropped lots and its
        change-detection hash: all in one transaction, so a record is never half-written."""
        mine = write_claims(prepared, indexes)
        retracted = self._retract_dropped(item.parsed, {c.fact_key for c in item.claims}, believed)
        self._remember(item.parsed, item.subject, item.derived)
        return mine, retracted

    @staticmethod
    def _believed_under(records) -> dict[str, list[tuple[str, str | None]]]:
        """(fact_key, lot) of the believed recall facts under each record's key prefix, for the whole chunk
        in one query. Read per record it was a scan of every believed fact per record (LIKE 'prefix%' cannot
        use the fact_key index under a non-C collation): quadratic in a first load. Read before the records'
        transactions: chunks touch disjoint prefixes, and a fact listed here that another writer retracts
        meanwhile is skipped by retract_in_transaction (it re-reads the key under its lock)."""
        numbers = sorted({parsed.recall_number for parsed in records})
        if not numbers:
            return {}
        under_number = Q()
        for number in numbers:
            under_number |= Q(fact_key__startswith=recall_terms.key_prefix(number))
        rows = list(Fact.objects.believed().filter(under_number, kind="recall").values_list("fact_key", "lot"))
        found: dict[str, list] = {}
        for parsed in records:
            prefix = recall_terms.key_prefix(parsed.recall_number, parsed.record)
            # The number's first record: the other records under it are not its lots.
            others = None if parsed.record else recall_terms.key_prefix(parsed.recall_number) + "record:"
            found[parsed.record_key] = [(key, lot) for key, lot in rows
                                        if key.startswith(prefix) and not (others and key.startswith(others))]
        return found

    def _retract_dropped(self, parsed, keys, believed) -> int:
        count = 0
        for fact_key, lot in believed:
            if fact_key in keys:
                continue
            if lot:
                reason = (f"lot {lot} is no longer listed in recall {parsed.recall_number}: openFDA amended its "
                          f"code_info" + (" to cover all lots" if parsed.scope == "drug" else ""))
            else:
                reason = (f"recall {parsed.recall_number} now names its lots; the drug-level fact is replaced "
                          f"by lot-level facts")
            if retract_in_transaction(fact_key, reason=reason, by=self.by) is not None:
                count += 1
        return count

    def _remember(self, parsed, subject, derived):
        ndcs, identity = derived
        reported = parsed.attributes.get("report_date")
        defaults = {"record_hash": parsed.record_hash, "subject": subject, "ndcs": ndcs, "identity": identity,
                    "identity_version": IDENTITY_VERSION, "lots": parsed.lots, "scope": parsed.scope,
                    "last_run": self.run, "report_date": date.fromisoformat(reported) if reported else None}
        if self.snapshot_updated:  # a file without meta.last_updated keeps the date we already hold
            defaults["snapshot_updated"] = self.snapshot_updated
        # One INSERT ... ON CONFLICT DO UPDATE (update_or_create takes a locking read and a savepoint).
        RecallRecord.objects.bulk_create([RecallRecord(recall_number=parsed.record_key, **defaults)],
                                         update_conflicts=True, unique_fields=["recall_number"],
                                         update_fields=[*defaults, "updated"])


class LabelIngester:
    def __init__(self, run: IngestRun):
        self.run = run
        self.by = f"ingest:run:{run.pk}"
        self.ref = run.snapshot_location or run.source_ref

    def ingest_chunk(self, records) -> Tally:
        run = Tally()
        for raw in records:
            run.fetched += 1
            labelled = _parse_or_quarantine(
                lambda record: label_claims(record, source_ref=self.ref, asserted_by=self.by), self.run, run, raw)
            if labelled is None:
                continue
            set_id, version, claims = labelled
            believed = {f.fact_key: f for f in Fact.objects.believed().defer("embedding")
                        .filter(kind="label", fact_key__startswith=f"label:{set_id}:")}
            if any((f.attributes or {}).get("label_version", 0) > version for f in believed.values()):
                run.unchanged += 1  # an older revision than the one we hold: never go backwards
                continue
            results = assert_claims(claims)
            _tally(run, results)
            keys = {c.fact_key for c in claims}
            dropped = 0
            for key in set(believed) - keys:
                section = key.rsplit(":", 1)[-1]
                if retract_claim(key, reason=f"label {set_id} version {version} no longer has a {section} section",
                                 by=self.by):
                    dropped += 1
            run.retracted += dropped
            if not dropped and all(r.status == "unchanged" for r in results):
                run.unchanged += 1
        return run
