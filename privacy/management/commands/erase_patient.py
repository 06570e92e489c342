"""Erase a patient's personal data on request and print the certificate (JSON)."""

import json

from django.core.management.base import CommandError

from core.commands import MigratedCommand
from patients.models import Patient
from privacy.services import erase_patient


class Command(MigratedCommand):
    help = ("Erase a patient's personal data (name, contact, free text), keep what recall work needs; "
            "print the certificate.")

    def add_arguments(self, parser):
        parser.add_argument("ref", help="The pharmacy's patient id (external_ref) or the patient's public id.")
        parser.add_argument("--reason", required=True, help="Why, e.g. 'erasure request of 2026-12-01'.")
        parser.add_argument("--by", required=True, help="Who is erasing (recorded on the certificate and audit).")

    def handle(self, *args, ref, reason, by, **options):
        patient = Patient.objects.filter(external_ref=ref).first()
        if patient is None:
            try:
                patient = Patient.objects.filter(public_id=ref).first()
            except Exception:  # noqa: BLE001 - not a UUID: simply not found
                patient = None
        if patient is None:
            raise CommandError(f"No patient with reference {ref!r}.")
        try:
            certificate = erase_patient(patient, by=f"command:{by}", reason=reason)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        certificate.refresh_from_db()  # with the audit chain's head, stamped after the commit
        self.stdout.write(json.dumps(certificate.as_dict(), indent=2))
