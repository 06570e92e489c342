"""manage.py sweep [--dry-run] [--fact ID ...]: re-decide stale decisions and draft corrections.

SIGTERM finishes the page in flight, marks the run handed back and exits with status 3; every committed
page stays, and the next sweep continues with the rest of the stale set (a second SIGTERM kills)."""

import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from core import shutdown
from corrections.models import SweepRun
from corrections.sweep import count_stale, sweep


class Command(BaseCommand):
    help = ("Re-decide every standing decision whose load-bearing fact version is now retracted; draft "
            "corrections where the verdict moved and notices for exposed patients who never asked. "
            "--dry-run shows what would change and writes nothing.")

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Preview only: write nothing.")
        parser.add_argument("--fact", type=int, action="append", dest="fact_ids", metavar="FACT_ID",
                            help="Only decisions that read this retracted fact version (repeatable).")
        parser.add_argument("--page-size", type=int, default=None, help="Decisions per committed page.")
        parser.add_argument("--no-notices", action="store_true", help="Skip proactive notices.")
        parser.add_argument("--trigger", default=SweepRun.Trigger.MANUAL, choices=SweepRun.Trigger.values)
        preview = parser.add_argument_group("preview an escalation before publishing it (with --dry-run)")
        preview.add_argument("--escalate", metavar="RECALL_NUMBER",
                             help="Show what escalating this recall would change; nothing is escalated.")
        preview.add_argument("--classification", choices=["Class I", "Class II", "Class III"])
        preview.add_argument("--lot", help="Only this lot's fact of the recall.")

    def handle(self, *args, dry_run, fact_ids, page_size, no_notices, trigger, verbosity, escalate,
               classification, lot, **options):
        if page_size is not None and page_size < 1:
            raise CommandError("--page-size must be at least 1.")
        if escalate:
            if not dry_run or not classification:
                raise CommandError("--escalate previews only: give --dry-run and --classification "
                                   "(to publish, use `manage.py escalate`).")
            from corrections.preview import preview_escalation

            try:
                report = preview_escalation(escalate, classification, lot)
            except LookupError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"PREVIEW of escalating {escalate}{' lot ' + lot if lot else ''} to {classification}:")
        else:
            total = count_stale(fact_ids)
            bar = tqdm(total=total, unit="decision", desc="sweep" + (" (dry run)" if dry_run else ""),
                       file=sys.stderr, disable=verbosity == 0)
            try:
                with shutdown.stop_on_sigterm():
                    report = sweep(fact_ids=fact_ids, trigger=trigger, dry_run=dry_run, page_size=page_size,
                                   progress=bar.update, notices=not no_notices)
            except shutdown.HandedBack as exc:
                bar.close()
                self.stderr.write(f"Handed back: {exc}.")
                sys.exit(3)
            finally:
                bar.close()
        out = self.stdout
        if dry_run:
            out.write("DRY RUN: nothing was written.")
            for row in report.preview:
                if row.get("notice"):
                    out.write(f"  would notify {row['patient']} ({row['match']} match) of {row['recall_number']}: "
                              f"{row['new_verdict']}")
                elif row["changed"]:
                    out.write(f"  would correct decision {row['decision']} for {row['patient']}: "
                              f"{row['old_verdict']} -> {row['new_verdict']} ({row['recall_number']})")
        out.write(f"decisions examined: {report.examined}")
        out.write(f"reaffirmed:         {report.reaffirmed}")
        out.write(f"corrected:          {report.corrected}")
        out.write(f"notices drafted:    {report.notices}")
        out.write(f"already handled:    {report.already_handled}")
        out.write(f"reasoner calls:     {report.reasoner_calls}")
        if report.errors:
            out.write(self.style.ERROR(f"errors:             {report.errors}"))
            for line in report.error_text[:20]:
                out.write(f"  {line}")
        if report.run is not None:
            out.write(f"sweep run {report.run.public_id} ({report.run.status})")
