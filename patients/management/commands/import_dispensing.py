"""manage.py import_dispensing FILE: import dispensing rows from a CSV, all rows or none.

The import is one transaction, so rows are committed all at once: the progress bar (stderr; --no-progress
hides it) shows the file's rows, stays at 0 while they are validated and written, and moves to the rows
imported only when that transaction has committed (with the rate over the whole import). It never reads
100% for a file that was refused: nothing of it was written.

A file whose patient columns register new patients (patients/csvimport.py) needs --by USERNAME: the staff
member who registers them, recorded in each new patient's admin history (as import_patients does).
"""

import csv
import io
import sys
from pathlib import Path

from django.core.management.base import CommandError
from tqdm import tqdm

from core.commands import MigratedCommand
from patients.csvimport import import_dispensing_csv
from patients.management.commands.import_patients import acting_user


def data_rows(data: bytes) -> int | None:
    """Rows under the header, as the CSV reader sees them (quoted line breaks included); None if unreadable."""
    try:
        return sum(1 for _ in csv.DictReader(io.StringIO(data.decode("utf-8-sig", errors="replace"))))
    except csv.Error:
        return None


class Command(MigratedCommand):
    help = "Import dispensing from a CSV file: all rows or none; every bad row is reported (row number + reason)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="CSV file (see patients/csvimport.py for the columns).")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")
        parser.add_argument("--by", metavar="USERNAME",
                            help="Who registers the new patients the file's patient columns add (their admin history).")

    def handle(self, *args, file: Path, **options):
        user = acting_user(options["by"]) if options["by"] else None
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise CommandError(f"Can't read {file}: {exc.strerror}.") from exc
        with tqdm(total=data_rows(data), unit="row", desc="import_dispensing (one transaction)", file=sys.stderr,
                  disable=options["no_progress"], dynamic_ncols=True) as bar:
            result = import_dispensing_csv(data, user=user)
            if result.ok:  # committed
                bar.total = result.rows
                bar.update(result.imported)
        if not result.ok:
            for error in result.errors:
                self.stderr.write(str(error))
            raise CommandError(f"Nothing imported: {len(result.errors)} problem(s) in {result.rows} row(s) of {file}.")
        registered = f" and registered {len(result.patients)} new patients" if result.patients else ""
        self.stdout.write(self.style.SUCCESS(f"Imported {result.imported} dispensing rows{registered} from {file}."))
