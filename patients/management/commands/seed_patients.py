from django.core.management.base import CommandError

from core.commands import MigratedCommand
from patients.synthetic import seed_patients


class Command(MigratedCommand):
    help = "Create synthetic patients and dispensing (lots drawn from believed recall facts plus unaffected lots)."

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, default=100, help="Patients to create (default 100).")
        parser.add_argument("--per-patient", type=int, default=3, help="Up to this many dispensings each (default 3).")
        parser.add_argument("--recalled-share", type=float, default=0.2,
                            help="Share of dispensings given a recalled lot (default 0.2).")
        parser.add_argument("--seed", type=int, default=None, help="Random seed, for repeatable data.")

    def handle(self, *args, count, per_patient, recalled_share, seed, **options):
        if not 0 <= recalled_share <= 1:
            raise CommandError("--recalled-share must be between 0 and 1.")
        try:
            summary = seed_patients(count, per_patient=per_patient, recalled_share=recalled_share, seed=seed)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if not summary["recalled_lots_available"]:
            self.stderr.write("No believed lot-level recall facts yet: every lot is unaffected. Ingest recalls first.")
        self.stdout.write(self.style.SUCCESS(
            "Created {patients} synthetic patients, {dispensings} dispensing rows ({recalled_dispensings} with a "
            "recalled lot, from {recalled_lots_available} available), batch {batch}.".format(**summary)
        ))
