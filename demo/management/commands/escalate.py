"""Demo: stage a classification change on a real recall (source demo:escalation).

    manage.py escalate --recall-number D-0123-2021 [--lot L] --classification "Class I"
"""

from django.core.management.base import BaseCommand, CommandError

from demo.escalation import escalate
from recalls.ingest import CLASSIFICATIONS


class Command(BaseCommand):
    help = "Assert a new version of a recall's fact(s) with a changed classification (demo escalation)."

    def add_arguments(self, parser):
        parser.add_argument("--recall-number", required=True)
        parser.add_argument("--lot", help="Only this lot's fact (default: every believed fact of the recall).")
        parser.add_argument("--classification", required=True, choices=CLASSIFICATIONS)
        parser.add_argument("--by", default="demo", help="Who is escalating (recorded as asserted_by).")

    def handle(self, *args, **options):
        from django.utils import timezone

        from corrections.tasks import describe_triggered_sweeps

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
        self.stdout.write(describe_triggered_sweeps(started))
