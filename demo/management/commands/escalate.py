"""Demo: stage a classification change on a real recall (source demo:escalation).

    manage.py escalate --recall-number D-0123-2021 [--lot L] --classification "Class I" [--wait 60]

The committed change triggers its sweep on the Celery worker (corrections.tasks); the command waits
for it and prints what it drafted, or says that no worker is there and how to sweep by hand.
"""

from django.core.management.base import CommandError
from django.db.models import Q
from django.utils import timezone

from core.commands import MigratedCommand
from corrections.sweep_outcome import await_triggered_sweeps
from demo.escalation import escalate
from memory.models import Fact
from recalls.ingest import CLASSIFICATIONS


class Command(MigratedCommand):
    help = "Assert a new version of a recall's fact(s) with a changed classification (demo escalation)."

    def add_arguments(self, parser):
        parser.add_argument("--recall-number", required=True)
        parser.add_argument("--lot", help="Only this lot's fact (default: every believed fact of the recall).")
        parser.add_argument("--classification", required=True, choices=CLASSIFICATIONS)
        parser.add_argument("--by", default="demo", help="Who is escalating (recorded as asserted_by).")
        parser.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                            help="How long to wait for the triggered sweep to end (default 60).")

    def handle(self, *args, **options):
        started = timezone.now()
        try:
            results = escalate(options["recall_number"], options["classification"], lot=options["lot"],
                               by=options["by"])
        except (LookupError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        for r in results:
            if r.status == "unchanged":
                self.stdout.write(f"{r.fact_key}: already {r.new_classification} (v{r.old_version}), "
                                  "nothing superseded")
            else:
                self.stdout.write(f"{r.fact_key}: v{r.old_version} -> v{r.new_version}, "
                                  f"{r.old_classification} -> {r.new_classification}")
        superseded = sum(1 for r in results if r.status != "unchanged")
        self.stdout.write(f"Superseded {superseded} fact version(s).")
        if superseded:
            # The retracted and the new versions: what the trigger sweeps (corrections.tasks).
            versions = Q(pk__in=[])
            for r in results:
                if r.status != "unchanged":
                    versions |= Q(fact_key=r.fact_key, version__in=[r.old_version, r.new_version])
            fact_ids = sorted(Fact.objects.filter(versions).values_list("id", flat=True))
            self.stdout.write(await_triggered_sweeps(started, fact_ids, timeout=options["wait"]))
