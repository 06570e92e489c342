from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from patients.csvimport import import_dispensing_csv


class Command(BaseCommand):
    help = "Import dispensing from a CSV file: all rows or none; every bad row is reported (row number + reason)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="CSV file (see patients/csvimport.py for the columns).")

    def handle(self, *args, file: Path, **options):
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise CommandError(f"Can't read {file}: {exc.strerror}.") from exc
        result = import_dispensing_csv(data)
        if not result.ok:
            for error in result.errors:
                self.stderr.write(str(error))
            raise CommandError(f"Nothing imported: {len(result.errors)} problem(s) in {result.rows} row(s) of {file}.")
        self.stdout.write(self.style.SUCCESS(f"Imported {result.imported} dispensing rows from {file}."))
