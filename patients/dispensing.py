"""Every dispensing write goes through here: admin form, inline rows, CSV import, API, demo.

    save_dispensing(record, *, actor) -> DispensingRecord     create or update: row + audit, in one transaction
    create_dispensings(records, *, actor) -> list             many new rows (CSV import, seeding): the same
                                                              rows + audit, written in bulk
    delete_dispensing(record, *, actor)                       delete: row + audit
    dispensing_changed                                       Signal, sent once per committed transaction

After commit, `dispensing_changed` is sent once per transaction with the patients and drugs that
changed; corrections connects the sweep to it, so a standing answer that rested on the old
dispensing is re-decided (docs/reasoning.md, "Decision inputs").
"""

from django.db import connection, transaction
from django.dispatch import Signal

from core import audit_chain
from patients.models import DispensingChange, DispensingRecord

# sender=DispensingRecord, changes=[(patient_id, drug), ...] (old and new drug of an edited row)
dispensing_changed = Signal()

_AUDITED = ("drug", "drug_text", "drug_source", "product_description", "ndc", "ndc_product", "lot", "lot_text",
            "lot_alternatives", "lot_unknown", "expiry", "serial", "gtin", "quantity", "dispensed_at", "site")


def _snapshot(record: DispensingRecord) -> dict:
    return {name: (str(getattr(record, name)) if getattr(record, name) is not None else None) for name in _AUDITED}


class _Pending:
    """Collects the changes of one transaction and announces them once, after commit."""

    def __init__(self):
        self.changes: set[tuple[int, str]] = set()

    def __call__(self):
        dispensing_changed.send(sender=DispensingRecord, changes=sorted(self.changes))


def _pending() -> _Pending:
    for _sids, func, _robust in connection.run_on_commit:
        if isinstance(func, _Pending):
            return func
    pending = _Pending()
    transaction.on_commit(pending)
    return pending


def save_dispensing(record: DispensingRecord, *, actor: str) -> DispensingRecord:
    """Create or update one row (normalised and validated by the caller's form or record.full_clean)."""
    with transaction.atomic():
        before = {}
        old_drug = None
        if record.pk:
            old = DispensingRecord.objects.filter(pk=record.pk).first()
            if old is not None:
                before, old_drug = _snapshot(old), old.drug
        record.save()
        DispensingChange.objects.create(
            actor_label=actor[:150],
            action=DispensingChange.Action.UPDATED if before else DispensingChange.Action.CREATED,
            patient_id=record.patient_id, region=record.region, dispensing_id=record.pk, before=before,
            after=_snapshot(record))
        pending = _pending()
        pending.changes.add((record.patient_id, record.drug))
        if old_drug is not None and old_drug != record.drug:
            pending.changes.add((record.patient_id, old_drug))
    return record


def delete_dispensing(record: DispensingRecord, *, actor: str) -> None:
    with transaction.atomic():
        DispensingChange.objects.create(
            actor_label=actor[:150], action=DispensingChange.Action.DELETED, patient_id=record.patient_id,
            region=record.region, dispensing_id=record.pk, before=_snapshot(record), after={})
        _pending().changes.add((record.patient_id, record.drug))
        record.delete()


BULK_BATCH = 1000


def create_dispensings(records: list[DispensingRecord], *, actor: str) -> list[DispensingRecord]:
    """Create many new rows with the same rows, audit and announcement as save_dispensing, in bulk
    (per-row saves cost four round trips each: ~47 rows/s against ~500 in bench/dispensing_import.py).
    Each record must be new and have passed full_clean(), which normalises it as save() would."""
    if any(r.pk for r in records):
        raise ValueError("create_dispensings() creates new rows only; update existing ones with save_dispensing().")
    with transaction.atomic():
        for record in records:
            # What save() derives (canonical lot, near key, NDC product, region, fingerprint): a bulk
            # row must never lack the NDC product or lot key that exposure reads.
            record.resolve_identity()
            record.fill_derived()
        DispensingRecord.objects.bulk_create(records, batch_size=BULK_BATCH)
        changes = DispensingChange.objects.bulk_create([
            DispensingChange(actor_label=actor[:150], action=DispensingChange.Action.CREATED,
                             patient_id=r.patient_id, region=r.region, dispensing_id=r.pk, before={},
                             after=_snapshot(r))
            for r in records
        ], batch_size=BULK_BATCH)
        # bulk_create skips save(): the audit chain is told of these events here.
        audit_chain.written(DispensingChange, [c.pk for c in changes])
        if records:
            _pending().changes.update((r.patient_id, r.drug) for r in records)
    return records
