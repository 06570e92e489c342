"""The shelf: receiving a 100,000-event EPCIS file, and "recalled units on hand" at 1,000,000 units.

    .venv/bin/python bench/shelf.py [--events 100000] [--units 1000000] [--repeats 200] [--reuse]

Own database (UNSAY_DB_NAME, default unsay_bench_shelf; hashing embeddings). SYNTHETIC data around the
REAL recall D-0502-2019 (losartan 50 mg, NDC 13668-409-30, lot 4L67C035); serials and other lots invented.

1. Receiving: an EPCIS 2.0 JSON document of N receiving ObjectEvents (one unit each, lot and expiry in ILMD,
   master data naming the NDC) through shelf.receiving.receive (parse, idempotence check, units, events,
   audit, then recall matching after commit), at a fresh site. Then the same file again (idempotent re-send),
   then a file dispensing every one of those units (one dispensing event each: each move checked against
   shelf.transitions.UNIT, the units locked, written by move_units). Same-run reference: parsing alone
   (shelf.epcis.parse_document).
2. Recalled units on hand: M units loaded by COPY across 20 sites and 2,000 lots (0.1% of them the recalled
   lot), the recall matched once (shelf.quarantine.match_facts), then shelf.selectors.recalled_units_on_hand()
   timed `repeats` times (p50 / p95). Same-run reference: one unit read by its SGTIN (unique index).
Targets: >= 5,000 events/s; p95 <= 50 ms.
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import describe_machine, percentile, setup_django  # noqa: E402

setup_django(db_name="unsay_bench_shelf")

from django.db import connection  # noqa: E402

from drugs.gs1 import gtin_for_ndc, ndc_candidates, sgtin_uri  # noqa: E402
from memory.fact_writes import assert_claim  # noqa: E402
from shelf import quarantine  # noqa: E402
from shelf.epcis import parse_document  # noqa: E402
from shelf.models import ReceivedEvent, ShelfTask, TaskUnit, Unit  # noqa: E402
from shelf.receiving import receive  # noqa: E402
from shelf.selectors import recalled_units_on_hand  # noqa: E402
from tests.factories import recall_claim  # noqa: E402

RECALL, NDC, LOT = "D-0502-2019", "13668-409-30", "4L67C035"
GTIN = gtin_for_ndc(NDC)


def shipment(n: int, run: str, step: str = "receiving") -> bytes:
    company, item = GTIN[1:8], GTIN[0] + GTIN[8:13]
    events = [{"type": "ObjectEvent", "eventTime": "2026-12-01T09:00:00.000Z", "eventTimeZoneOffset": "+00:00",
               "eventID": f"urn:uuid:{run}-{step}-{i}", "epcList": [sgtin_uri(GTIN, f"{run}{i:09d}")],
               "action": "ADD", "bizStep": step, "bizLocation": {"id": "urn:epc:id:sgln:0614141.00001.0"},
               "ilmd": {"cbvmda:lotNumber": LOT if i % 1000 == 0 else f"SYN{i % 500:04d}",
                        "cbvmda:itemExpirationDate": "2028-10-31"}} for i in range(n)]
    master = {"vocabularyList": [{"type": "urn:epcglobal:epcis:vtype:EPCClass", "vocabularyElementList": [
        {"id": f"urn:epc:idpat:sgtin:{company}.{item}.*",
         "attributes": [{"id": "urn:epcglobal:cbv:mda#additionalTradeItemIdentification", "attribute": NDC}]}]}]}
    return json.dumps({"type": "EPCISDocument", "schemaVersion": "2.0", "creationDate": "2026-12-01T10:00:00Z",
                       "epcisHeader": {"epcisMasterData": master}, "epcisBody": {"eventList": events}}).encode()


def bench_receiving(n: int):
    run = f"R{int(time.time())}"
    data = shipment(n, run)
    began = time.perf_counter()
    parse_document(data)
    parse_s = time.perf_counter() - began
    began = time.perf_counter()
    receipt = receive(data, site=f"bench-{run}", source="bench")
    seconds = time.perf_counter() - began
    assert receipt.applied == n and not receipt.refused, receipt.as_dict()
    began = time.perf_counter()
    again = receive(data, site=f"bench-{run}", source="bench")
    resend_s = time.perf_counter() - began
    assert again.skipped == n and again.units_new == 0
    dispensing = shipment(n, run, "dispensing")
    began = time.perf_counter()
    moved = receive(dispensing, site=f"bench-{run}", source="bench")
    move_s = time.perf_counter() - began
    assert moved.applied == n and moved.units_changed == n, moved.as_dict()
    print(f"receiving: {n:,} events ({len(data) / 1e6:.1f} MB JSON) in {seconds:.2f} s = {n / seconds:,.0f} events/s "
          f"(target >= 5,000); re-send {resend_s:.2f} s = {n / resend_s:,.0f} events/s, nothing written")
    print(f"  the same units dispensed, one event each: {move_s:.2f} s = {n / move_s:,.0f} events/s")
    print(f"  reference, same run: parsing alone {parse_s:.2f} s = {n / parse_s:,.0f} events/s")


def load_units(m: int):
    rng = random.Random(7)
    sites = [f"site-{i:02d}" for i in range(20)]
    ndcs = [NDC] + [f"{50000 + i}-{100 + i % 800}-30" for i in range(199)]
    products = {ndc: [c.product for c in ndc_candidates(gtin_for_ndc(ndc))] for ndc in ndcs}
    began = time.perf_counter()
    with connection.cursor() as cursor, cursor.cursor.copy(
            "COPY shelf_unit (site, gtin, serial, ndc, ndc_products, lot, lot_printed, expiry, product_name, state, "
            "received_at, changed_at) FROM STDIN") as copy:
        for i in range(m):
            ndc = NDC if i % 100 == 0 else ndcs[1 + i % 199]
            lot = LOT if (ndc == NDC and i % 1000 == 0) else f"SYN{rng.randrange(2000):04d}"
            state = "dispensed" if i % 10 == 3 else "on_hand"
            copy.write_row((sites[i % 20], gtin_for_ndc(ndc), f"U{i:010d}",
                            "13668-0409-30" if ndc == NDC else "", ["13668-0409"] if ndc == NDC else products[ndc],
                            lot, lot, "2028-10-31", "", state, "2026-12-01T09:00:00Z", "2026-12-01T09:00:00Z"))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE shelf_unit")
    print(f"loaded {m:,} units by COPY in {time.perf_counter() - began:.0f} s")


def bench_on_hand(m: int, repeats: int, reuse: bool):
    bench_units = Unit.objects.filter(site__startswith="site-")
    if not (reuse and bench_units.count() >= m):
        TaskUnit.objects.all().delete()
        ShelfTask.objects.all().delete()
        Unit.objects.all().delete()  # the bench's own database: start from an empty shelf
        load_units(m)
    fact = assert_claim(recall_claim(RECALL, LOT)).fact
    if fact is None:
        from memory.models import Fact

        fact = Fact.objects.believed().get(fact_key=f"recall:{RECALL}:lot:{LOT}")
    began = time.perf_counter()
    quarantine.match_facts([fact.id])
    match_s = time.perf_counter() - began
    total = Unit.objects.count()
    found = recalled_units_on_hand()
    timings = []
    for _ in range(repeats):
        t = time.perf_counter()
        recalled_units_on_hand()
        timings.append((time.perf_counter() - t) * 1000)
    ref = []
    for i in range(repeats):
        t = time.perf_counter()
        Unit.objects.filter(site=f"site-{i % 20:02d}", gtin=gtin_for_ndc(NDC), serial=f"U{i * 100:010d}").first()
        ref.append((time.perf_counter() - t) * 1000)
    print(f"recalled units on hand at {total:,} units: {found} ; matching the recall once {match_s * 1000:.0f} ms")
    print(f"  recalled_units_on_hand(): p50 {percentile(timings, 50):.2f} ms  p95 {percentile(timings, 95):.2f} ms "
          f"(target p95 <= 50 ms, {repeats} runs)")
    print(f"  reference, same run: one unit by SGTIN p50 {percentile(ref, 50):.2f} ms  "
          f"p95 {percentile(ref, 95):.2f} ms")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--units", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--reuse", action="store_true", help="keep the units loaded by an earlier run")
    args = parser.parse_args()
    print(describe_machine())
    bench_receiving(args.events)
    ReceivedEvent.objects.filter(site__startswith="bench-").delete()
    Unit.objects.filter(site__startswith="bench-").delete()
    bench_on_hand(args.units, args.repeats, args.reuse)


if __name__ == "__main__":
    main()
