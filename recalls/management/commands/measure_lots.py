"""Lot precision/recall and scope-kind accuracy of recalls.lots.parse.parse_scope on the evaluation split.

    manage.py measure_lots [--file recalls/data/lots_eval.json] [--errors]

The evaluation split (recalls.lots.measure.EVALUATION_SPLIT) was drawn by bench/lots_split.py and
labelled by hand before the parser was written; it is never used to change the parser. Every error is
listed with --errors (docs/lots.md carries the list with a reason for each).
"""

from django.core.management.base import BaseCommand

from recalls.lots.measure import EVALUATION_SPLIT, load_cases, score


class Command(BaseCommand):
    help = "Measure lot-scope parsing against the hand-labelled evaluation split."

    def add_arguments(self, parser):
        parser.add_argument("--file", default=str(EVALUATION_SPLIT),
                            help="labelled cases (default: the evaluation split)")
        parser.add_argument("--errors", action="store_true", help="list every error")

    def handle(self, *args, **options):
        report = score(load_cases(options["file"]))
        self.stdout.write(report.summary())
        if options["errors"]:
            for recall_number, what, detail, excerpt in report.errors:
                self.stdout.write(f"  {recall_number}  {what}: {detail}  | {excerpt}")
