"""Build demo/data/demo-slice.json from the real fixtures in tests/fixtures/openfda/ (records unmodified).

All sartan records (valsartan, losartan, irbesartan named in the product, its openfda generic name
or the reason for recall) of the 2021 bulk file, the 149 recent-sample
records, and a fixed, seeded sample of other 2021 records. Deterministic: re-running it gives the
same file.
"""

import json
import random
import re
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from demo.slice import DEMO_SLICE
from recalls.documents import load_document

SNAPSHOT_FILES = ("drug-enforcement-2021-04-28.json.zip", "drug-enforcement-recent-sample.json")
SARTAN = re.compile(r"valsartan|losartan|irbesartan", re.I)


def _is_sartan(record) -> bool:
    """The product is a sartan, or the reason names one (label mix-ups with a sartan)."""
    names = " ".join((record.get("openfda") or {}).get("generic_name") or [])
    text = " ".join([record.get("product_description") or "", record.get("reason_for_recall") or "", names])
    return bool(SARTAN.search(text))


class Command(BaseCommand):
    help = "Write the demo slice of real openFDA records."

    def add_arguments(self, parser):
        parser.add_argument("--others", type=int, default=200, help="Other 2021 records to add (seeded sample).")
        parser.add_argument("--seed", type=int, default=2021)
        parser.add_argument("--output", default=str(DEMO_SLICE))
        # A maintainer's build step, not run time: the folder of real openFDA snapshots is named, never
        # assumed (the repository keeps them with the tests: tests/fixtures/openfda).
        parser.add_argument("--snapshots", required=True, type=Path,
                            help=f"Folder holding {' and '.join(SNAPSHOT_FILES)}, e.g. tests/fixtures/openfda.")

    def handle(self, *args, **options):
        missing = [name for name in SNAPSHOT_FILES if not (options["snapshots"] / name).is_file()]
        if missing:
            raise CommandError(f"{options['snapshots']} lacks {', '.join(missing)}: name the folder of the real "
                               f"openFDA snapshots (tests/fixtures/openfda in this repository)")
        bulk = load_document(options["snapshots"] / SNAPSHOT_FILES[0])
        recent = load_document(options["snapshots"] / SNAPSHOT_FILES[1])
        sartans = [r for r in bulk["results"] if _is_sartan(r)]
        taken = {r.get("recall_number") for r in sartans} | {r.get("recall_number") for r in recent["results"]}
        others = sorted((r for r in bulk["results"] if not _is_sartan(r) and r.get("recall_number")
                         and r.get("recall_number") not in taken), key=lambda r: r["recall_number"])
        rng = random.Random(options["seed"])
        picked = rng.sample(others, min(options["others"], len(others)))
        # The recent sample duplicates no 2021 recall number by construction of `taken`; keep one copy per number.
        results, seen = [], set()
        for record in sartans + recent["results"] + picked:
            key = (record.get("recall_number"), json.dumps(record, sort_keys=True))
            if key in seen:
                continue
            seen.add(key)
            results.append(record)
        document = {
            "meta": {
                "disclaimer": bulk["meta"].get("disclaimer"),
                "terms": bulk["meta"].get("terms"),
                "license": bulk["meta"].get("license"),
                "last_updated": recent["meta"].get("last_updated"),
                "note": (f"Demo slice of real, unmodified openFDA records built by manage.py make_demo_slice "
                         f"--others {options['others']} --seed {options['seed']}: {len(sartans)} sartan records "
                         f"from the 2021-04-28 bulk file, {len(recent['results'])} recent-sample records, "
                         f"{len(picked)} other 2021 records."),
                "results": {"skip": 0, "limit": len(results), "total": len(results)},
            },
            "results": results,
        }
        output = Path(options["output"])
        output.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
        self.stdout.write(f"Wrote {output}: {len(results)} records ({len(sartans)} sartan, "
                          f"{len(recent['results'])} recent, {len(picked)} others).")
