"""manage.py import_patients FILE --by USERNAME: register patients from a CSV, all rows or none.

Columns and validation: patients/patient_import.py. USERNAME is the staff member who registers them (an active
user with the patients.add_patient permission): each patient's admin history records the addition by them, as
for a patient added in the admin.
"""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError

from core.commands import MigratedCommand
from patients.patient_import import import_patients_csv


def acting_user(username: str):
    """The active user named on the command line, or CommandError."""
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise CommandError(f"No active user {username!r}: --by names the staff member who registers the patients.")
    return user


class Command(MigratedCommand):
    help = "Register patients from a CSV file: all rows or none; every bad row is reported (row number + reason)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="CSV file (see patients/patient_import.py for the columns).")
        parser.add_argument("--by", required=True, metavar="USERNAME",
                            help="Who registers the patients (recorded in each patient's admin history).")

    def handle(self, *args, file: Path, by: str, **options):
        user = acting_user(by)
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise CommandError(f"Can't read {file}: {exc.strerror}.") from exc
        try:
            result = import_patients_csv(data, user=user)
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from None
        if not result.ok:
            for error in result.errors:
                self.stderr.write(str(error))
            raise CommandError(f"Nothing imported: {len(result.errors)} problem(s) in {result.rows} row(s) of {file}.")
        self.stdout.write(self.style.SUCCESS(f"Registered {result.imported} patients from {file}."))
