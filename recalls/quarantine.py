"""Records an ingest cannot turn into facts: kept once per record and source, with the reason.

    keep(run, raw, reason) -> QuarantinedRecord

A record is kept verbatim-ish (`raw`, made storable whatever came in: NULs, lone surrogates, any type), so
it is never lost and never stops the run. The same record (the same content, by a digest of what is kept)
from the same source (the run's file or archived snapshot, else its API query) is one row: ingesting a
file again, or resuming a stopped run of it, finds the row and moves it to the new run with the new
reason and the time it was seen again, instead of adding a copy. A record that differs by one character,
or the same record in another file, is a row of its own. The run's `quarantined` count still counts every
record the run could not use.
"""

import hashlib
import json

from django.utils import timezone

from .models import QuarantinedRecord
from .record_fields import storable

KEPT_TEXT = 5000  # code_info, reason and a non-JSON record's text are cut here


def source_of(run) -> str:
    return (run.snapshot_location or run.source_ref)[:500]


def kept_form(raw):
    """What is stored of a record: any JSON object or list made storable, anything else its repr."""
    return storable(raw) if isinstance(raw, (dict, list)) else {"value": storable(repr(raw))[:KEPT_TEXT]}


def record_digest(kept) -> str:
    return hashlib.sha256(json.dumps(kept, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def keep(run, raw, reason) -> QuarantinedRecord:
    """The record's quarantine row for this source, written or brought up to this run (one statement, so
    chunks ingested in threads that meet the same record never write it twice)."""
    record = raw if isinstance(raw, dict) else {}
    kept = kept_form(raw)
    row = QuarantinedRecord(
        run=run, source=source_of(run), record_digest=record_digest(kept), raw=kept, last_seen=timezone.now(),
        recall_number=storable(str(record.get("recall_number") or record.get("set_id") or ""))[:40],
        drug=storable(str(record.get("product_description") or ""))[:300],
        code_info=storable(str(record.get("code_info") or ""))[:KEPT_TEXT],
        reason=storable(str(reason))[:KEPT_TEXT],
    )
    QuarantinedRecord.objects.bulk_create(
        [row], update_conflicts=True, unique_fields=["source", "record_digest"],
        update_fields=["run", "reason", "last_seen"])
    return row
