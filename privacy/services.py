"""Erasure of a patient's personal data on request, with a certificate.

    erase_patient(patient, *, by, reason) -> ErasureCertificate

One transaction: pending drafts and messages for the patient are ended (never sent), then each app
erases what it holds (patients: name, contact, pharmacy id; memory: questions and answers; corrections:
letters, recipients, audit details; worklist: contact notes), the patient's API keys are revoked
(privacy.keys: a use of one later is refused and audited), the copies of their identity that no column
ties to them are replaced (privacy.copies: Django's admin log, recall-step notes, sign-in records,
sessions), an audit event records the erasure with the counts and the audit events it redacted, and the
certificate is written, listing every table the erasure reached and the rows it changed there. After
commit the audit chain is sealed and the certificate records its head. What stays is what carries no
identity and what recall work and the audit need: statuses, verdicts, recall numbers, match classes,
dispensed drugs and lots, times. Copies outside the database (sent mail, SMS provider logs, backups) are
not reached. tests/privacy walks every text and JSON column of every table after an erasure, so a table
added later that keeps a copy is found."""

import functools

from django.contrib.sessions.models import Session
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from ask.models import ApiKey
from core import audit_chain
from corrections import audit
from corrections.erasure import end_pending_work
from corrections.erasure import redact as redact_corrections
from corrections.models import AuditEvent, Correction, OutboxMessage
from memory.decisions import redact_patient_decisions
from memory.models import Decision
from patients.erasure import redact_patient
from patients.models import Patient
from worklist.models import ContactAttempt, PatientAnswer, WorkEvent
from worklist.services import redact_patient_notes

from . import copies, keys
from .models import ErasureCertificate

PERMISSION = "privacy.erase_patient"

# The table of each kind of row the apps' erasure steps count (their counts name kinds, the certificate
# names tables too). A kind missing here fails every erasure (KeyError), so the erasure's tests find it.
TABLE_OF_KIND = {
    "patients": Patient, "decisions": Decision, "corrections": Correction, "outbox messages": OutboxMessage,
    "audit events": AuditEvent, "contact attempts": ContactAttempt, "worklist events": WorkEvent,
    "patient answers": PatientAnswer,
}


def erase_patient(patient, *, by, reason: str) -> ErasureCertificate:
    """`by`: a user with the erase permission, or a label (the command line's operator)."""
    if not isinstance(by, str) and not by.has_perm(PERMISSION):
        raise PermissionDenied("Erasing a patient's personal data needs the 'erase patient' permission.")
    reason = (reason or "").strip()
    if not reason:
        raise ValueError("An erasure needs a reason (e.g. the patient's request and its date).")
    label = by if isinstance(by, str) else by.get_username()
    with transaction.atomic():
        identity = copies.Identity.of(Patient.objects.select_for_update().get(pk=patient.pk))
        pending = end_pending_work(patient.pk)
        counts = dict(redact_patient(patient))
        counts["decisions"] = redact_patient_decisions(patient.pk)
        redacted, event_ids = redact_corrections(patient.pk)
        counts.update(redacted)
        notes, work_event_ids = redact_patient_notes(patient.pk)
        counts.update(notes)
        tables = _tables(counts)
        tables[ApiKey._meta.db_table] = counts["API keys revoked"] = keys.revoke_patient_keys(patient.pk)
        scrubbed, scrubbed_events = copies.scrub_free_text(identity)
        for table, changed in scrubbed.items():
            tables[table] = tables.get(table, 0) + changed
        # Every audited event whose redactable part this erasure blanked, by table: the audit chain checks
        # that each redacted event is named by an erasure.
        redacted_rows = {AuditEvent._meta.db_table: event_ids, WorkEvent._meta.db_table: work_event_ids}
        for table, ids in scrubbed_events.items():
            redacted_rows[table] = sorted({*redacted_rows.get(table, []), *ids})
        tables[Session._meta.db_table] = counts["sessions"] = copies.scrub_sessions(identity)
        counts = {"pending work ended": pending, **counts}
        event = audit.record(AuditEvent.Action.ERASED, by=by, after={
            "patient": str(patient.public_id), "counts": counts, "tables": tables, "redacted_events": event_ids,
            "redacted": redacted_rows},
            note=reason)
        # The event lists what was erased; the certificate adds the erasure's own records, written after it.
        tables[AuditEvent._meta.db_table] += 1
        tables[ErasureCertificate._meta.db_table] = 1
        certificate = ErasureCertificate.objects.create(
            patient_public_id=patient.public_id, erased_at=timezone.now(), erased_by=label[:150], reason=reason,
            counts=counts, tables=dict(sorted(tables.items())), audit_event_id=event.pk)
        # After the commit that holds the erasure (the caller's, if it runs in one), its audit event
        # is linked into the chain; the certificate then names the chain's head.
        transaction.on_commit(functools.partial(_stamp_chain_head, certificate.pk))
    return certificate


def _tables(counts: dict[str, int]) -> dict[str, int]:
    """Rows changed per table, from the apps' counts per kind. (The pending work ended is not added: those
    rows are the patient's corrections and messages, which the redaction then changes and counts.)"""
    tables: dict[str, int] = {}
    for kind, changed in counts.items():
        table = TABLE_OF_KIND[kind]._meta.db_table
        tables[table] = tables.get(table, 0) + changed
    return tables


def _stamp_chain_head(certificate_id: int):
    """Runs after the on-commit seal of the erasure's own events (registered before it), so the head
    includes the erasure's event."""
    seq, link = audit_chain.head()
    ErasureCertificate.objects.filter(pk=certificate_id).update(chain_head_seq=seq, chain_head_link=link)
