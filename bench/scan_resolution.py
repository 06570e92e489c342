"""Resolving a scanned GTIN to an NDC against known products (patients.scanning.known_products).

    .venv/bin/python bench/scan_resolution.py [--repeats 50]

Loads real openFDA enforcement records into its own database (UNSAY_DB_NAME, default
unsay_bench_scan; hashing embeddings, so no model is needed) once — the demo slice (617 records) by
default, `--file` for another, e.g. the 12,504-record 2021 bulk file (about 25 min to ingest here) — then
times known_products() for a GTIN whose product and lot a believed recall names (Mylan valsartan
0378-5814-77, lot 3069020: settled by the GIN index on Fact.scopes), for the same product with a lot
no recall names (settled by the unindexed attributes scan), and for a product nothing names (the
worst case: the dispensing ndc index, the scopes index, then the attributes scan).
Same-run reference: an indexed believed-fact lookup by lot.
Prints min/median/max in ms and the number of believed recall facts scanned.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import setup_django  # noqa: E402

setup_django(db_name="unsay_bench_scan")

from django.core.management import call_command  # noqa: E402

from demo.slice import DEMO_SLICE  # noqa: E402
from drugs.gs1 import gtin_for_ndc, ndc_candidates  # noqa: E402
from memory.models import Fact  # noqa: E402
from patients.scanning import known_products  # noqa: E402


def timed(fn, repeats):
    fn()  # warm
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        timings.append((time.perf_counter() - began) * 1000)
    return f"min {min(timings):7.2f} ms  median {statistics.median(timings):7.2f} ms  max {max(timings):7.2f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--file", help="enforcement file to ingest instead of the demo slice (first run only)")
    args = parser.parse_args()
    if not Fact.objects.filter(kind=Fact.Kind.RECALL).exists():
        began = time.monotonic()
        source = ["--file", args.file or str(DEMO_SLICE)]
        call_command("ingest_recalls", *source, "--no-progress", verbosity=0)
        print(f"ingested {args.file or 'the demo slice'} in {time.monotonic() - began:.0f} s")
    believed = Fact.objects.believed().filter(kind=Fact.Kind.RECALL).count()
    known = ndc_candidates(gtin_for_ndc("0378-5814-77"))
    unknown = ndc_candidates(gtin_for_ndc("0093-7367-56"))
    assert "00378-5814" in known_products(known, "X1"), "the valsartan recall's NDCs are not in its attributes"
    print(f"{believed} believed recall facts")
    print(f"{'recalled product and lot':<34}", timed(lambda: known_products(known, "3069020"), args.repeats),
          f"-> {sorted(known_products(known, '3069020'))}")
    print(f"{'recalled product, other lot':<34}", timed(lambda: known_products(known, "X1"), args.repeats),
          f"-> {sorted(known_products(known, 'X1'))}")
    print(f"{'unknown product (worst case)':<34}", timed(lambda: known_products(unknown, "X1"), args.repeats),
          f"-> {sorted(known_products(unknown, 'X1'))}")
    print(f"{'reference: believed facts by lot':<34}",
          timed(lambda: list(Fact.objects.believed().filter(lot="3069020").values_list("id")), args.repeats))


if __name__ == "__main__":
    main()
