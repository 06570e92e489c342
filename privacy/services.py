"""Erasure of a patient's personal data on request, with a certificate.

    erase_patient(patient, *, by, reason) -> ErasureCertificate

One transaction: pending drafts and messages for the patient are ended (never sent), then each app
erases what it holds (patients: name, contact, pharmacy id; memory: questions and answers; corrections:
letters, recipients, audit details; worklist: contact notes), an audit event records the erasure with
the counts and the audit events it redacted, and the certificate is written. After commit the audit
chain is sealed and the certificate records its head. What stays is what carries no identity and what
recall work and the audit need: statuses, verdicts, recall numbers, match classes, dispensed drugs and
lots, times. Copies outside the database (sent mail, SMS provider logs, backups) are not reached."""

import functools

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from corrections import audit
from corrections.erasure import end_pending_work
from corrections.erasure import redact as redact_corrections
from corrections.models import AuditChainHead, AuditEvent
from memory.decisions import redact_patient_decisions
from patients.erasure import redact_patient
from worklist.services import redact_patient_notes

from .models import ErasureCertificate

PERMISSION = "privacy.erase_patient"


def erase_patient(patient, *, by, reason: str) -> ErasureCertificate:
    """`by`: a user with the erase permission, or a label (the command line's operator)."""
    if not isinstance(by, str) and not by.has_perm(PERMISSION):
        raise PermissionDenied("Erasing a patient's personal data needs the 'erase patient' permission.")
    reason = (reason or "").strip()
    if not reason:
        raise ValueError("An erasure needs a reason (e.g. the patient's request and its date).")
    label = by if isinstance(by, str) else by.get_username()
    with transaction.atomic():
        counts = {"pending work ended": end_pending_work(patient.pk)}
        counts.update(redact_patient(patient))
        counts["decisions"] = redact_patient_decisions(patient.pk)
        redacted, event_ids = redact_corrections(patient.pk)
        counts.update(redacted)
        counts.update(redact_patient_notes(patient.pk))
        event = audit.record(AuditEvent.Action.ERASED, by=by, after={
            "patient": str(patient.public_id), "counts": counts, "redacted_events": event_ids}, note=reason)
        certificate = ErasureCertificate.objects.create(
            patient_public_id=patient.public_id, erased_at=timezone.now(), erased_by=label[:150], reason=reason,
            counts=counts, audit_event_id=event.pk)
        # After the commit that holds the erasure (the caller's, if it runs in one), its audit event
        # is linked into the chain; the certificate then names the chain's head.
        transaction.on_commit(functools.partial(_stamp_chain_head, certificate.pk))
    return certificate


def _stamp_chain_head(certificate_id: int):
    audit.seal()
    head = AuditChainHead.objects.filter(pk=1).first()
    if head is not None:
        ErasureCertificate.objects.filter(pk=certificate_id).update(chain_head_seq=head.seq,
                                                                    chain_head_link=head.link_hash)
