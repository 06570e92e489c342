"""manage.py sweep [--dry-run] [--fact ID ...]: re-decide stale decisions and draft corrections. A dry run
prints what would change, naming each patient by their reference only.

SIGTERM finishes the page in flight, marks the run handed back and exits with status 3; every committed
page stays, and the next sweep continues with the rest of the stale set (a second SIGTERM kills)."""

import sys

from django.core.management.base import CommandError
from tqdm import tqdm

from core import shutdown
from core.commands import MigratedCommand
from corrections.models import SweepRun
from corrections.preview import preview_escalation
from corrections.sweep.run import count_stale, sweep


class SweepProgressBars:
    """The sweep's progress in units of work done, each counted once it has committed: decisions
    re-decided (a page's, after its transaction commits; of the stale set counted when the sweep began,
    raised if more went stale meanwhile), then recall facts whose exposed patients who never asked
    were checked for notices. Each bar shows its rate and time left, and reads 100% only when its last
    unit has committed."""

    def __init__(self, stale: int, *, dry_run: bool, disable: bool):
        self.disable = disable
        self._dry = " (dry run)" if dry_run else ""
        self.decisions = self._bar(stale, "re-decided", "decision")
        self.notices = None

    def _bar(self, total, desc, unit):
        return tqdm(total=total, desc=f"sweep: {desc}{self._dry}", unit=unit, file=sys.stderr, disable=self.disable,
                    mininterval=0.2, dynamic_ncols=True)

    def redecided(self, n: int) -> None:
        if self.decisions.n + n > self.decisions.total:  # went stale after the count: the total grows
            self.decisions.total = self.decisions.n + n
        self.decisions.update(n)

    def notices_checked(self, done: int, total: int) -> None:
        if self.notices is None:
            self._all_redecided()
            self.notices = self._bar(total, "recall facts checked for notices", "fact")
        self.notices.update(done - self.notices.n)

    def _all_redecided(self) -> None:
        """Every page has committed: what the count at the start expected and another sweep took (or
        that stopped being stale) was never this sweep's work, so the bar ends at what it did."""
        if self.decisions.total != self.decisions.n:
            self.decisions.total = self.decisions.n
            self.decisions.refresh()
        self.decisions.close()

    def finish(self) -> None:
        """The sweep returned: all its work has committed."""
        if self.notices is None:
            self._all_redecided()
        self.close()

    def close(self) -> None:
        self.decisions.close()
        if self.notices is not None:
            self.notices.close()


class Command(MigratedCommand):
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
            try:
                report = preview_escalation(escalate, classification, lot)
            except LookupError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"PREVIEW of escalating {escalate}{' lot ' + lot if lot else ''} to {classification}:")
        else:
            progress = SweepProgressBars(count_stale(fact_ids), dry_run=dry_run, disable=verbosity == 0)
            try:
                with shutdown.stop_on_sigterm():
                    report = sweep(fact_ids=fact_ids, trigger=trigger, dry_run=dry_run, page_size=page_size,
                                   progress=progress.redecided, notices=not no_notices,
                                   notices_progress=progress.notices_checked)
                progress.finish()
            except shutdown.HandedBack as exc:
                progress.close()
                self.stderr.write(f"Handed back: {exc}.")
                sys.exit(3)
            finally:
                progress.close()
        out = self.stdout
        if dry_run:
            out.write("DRY RUN: nothing was written.")
            # Patients by reference only: what a terminal shows ends up in scrollback, CI output and tickets.
            for row in report.preview:
                who = f"patient {row['patient_ref']}" if row["patient_ref"] else "no patient"
                if row.get("notice"):
                    out.write(f"  would notify {who} ({row['match']} match) of {row['recall_number']}: "
                              f"{row['new_verdict']}")
                elif row["changed"]:
                    out.write(f"  would correct decision {row['decision']} for {who}: "
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
