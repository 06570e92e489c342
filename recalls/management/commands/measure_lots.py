"""Precision and recall of recalls.lots.extract_lots on the hand-labelled fixture (micro-averaged over lots).

    manage.py measure_lots [--show-errors]
"""

import json

from django.conf import settings
from django.core.management.base import BaseCommand

from recalls.lots import extract_lots
from recalls.normalize import normalize_lot

LABELLED = settings.BASE_DIR / "tests" / "fixtures" / "lots_labelled.json"


class Command(BaseCommand):
    help = "Measure lot extraction against tests/fixtures/lots_labelled.json."

    def add_arguments(self, parser):
        parser.add_argument("--show-errors", action="store_true")

    def handle(self, *args, **options):
        data = json.loads(LABELLED.read_text())
        for key, title in (("cases", "development set (rules written while reading these)"),
                           ("heldout_cases", "held-out set (labelled after, never tuned on)")):
            tp = fp = fn = 0
            cases = data.get(key, [])
            for case in cases:
                expected = {normalize_lot(lot) for lot in case["expected_lots"]}
                found = set(extract_lots(case["code_info"]))
                tp, fp, fn = tp + len(expected & found), fp + len(found - expected), fn + len(expected - found)
                if options["show_errors"] and expected != found:
                    self.stdout.write(f"  FP {sorted(found - expected)} FN {sorted(expected - found)}: "
                                      f"{case['code_info'][:100]!r}")
            precision = tp / (tp + fp) if tp + fp else 0.0
            recall = tp / (tp + fn) if tp + fn else 0.0
            self.stdout.write(f"{title}: {len(cases)} strings, {tp + fn} labelled lots; "
                              f"TP {tp} FP {fp} FN {fn}; precision {precision:.3f}, recall {recall:.3f}")
