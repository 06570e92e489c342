"""Exposure recall on real recalls: are the holders of a recalled package and lot found, however the
pharmacy typed the name and the lot?

    .venv/bin/python bench/exposure_recall.py [--records 150] [--block-only 50] [--seed 1]
                                              [--fixtures tests/fixtures/openfda]

Runs in its own database (UNSAY_DB_NAME, default unsay_bench_exposure_recall) on the embedded engine,
migrated and emptied of patients and facts first.

Data: a seeded sample of real Class I/II openFDA enforcement records (2021 bulk file + 2023 part) whose
lots are listed and whose package NDC is known: --records whose text names it, and up to --block-only
whose NDC only the openFDA block lists (reported apart; the fixtures hold 10 such records),
ingested as the ingestion code builds them (recalls.ingest.recall_claims -> memory.fact_writes.assert_claim).
Per record, synthetic patients hold the recalled package NDC (typed as printed, 10 digits with hyphens,
where openFDA gives that form) and one of its lots, the name typed
    brand      "<Brand> <strength> <form>"            (openFDA brand_name)
    generic    "<Generic> <strength> <form>"          (openFDA generic_name)
    abbrev     "LOSART POT 50MG TAB"                  (a pharmacy system's truncated name)
and the lot typed five ways: as printed, with a hyphen inside, with a space inside, lower case, and
"Lot# " before it. Decoys per record: another recalled product's name and NDC (no shared ingredient, another NDC
product) with this lot; this
package with a lot of another recall; this name and lot on an unrelated product's NDC (probable is
allowed there, by the repackager rule: same ingredients, another labeler's pack, exact lot).

Every row is written through the CSV import (patients.csvimport -> patients.dispensing.create_dispensings),
as a pharmacy would load it. Exposure is read with patients.services.exposed_patients_for_recall.

Prints, per name style: holders found (confirmed or probable) / holders (goal 1.00), and how many
as confirmed; false confirmed over the decoys (goal 0), and decoys shown as probable (a person
checks those). Same-run references: the holders typed the plainest way (generic name, lot exactly as
the recall prints it); the same names and lots with no NDC (what the name alone finds); and the time
of one exposure lookup against a bare (ndc_product, lot) query.
"""

import argparse
import csv
import io
import json
import random
import re
import statistics
import sys
import time
import zipfile
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, setup_django  # noqa: E402

setup_django(db_name="unsay_bench_exposure_recall", profile="test")

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from drugs.lots import canonical_lot  # noqa: E402
from drugs.matching import MatchClass  # noqa: E402
from drugs.ndc import ndcs_in_text, normalize_ndc  # noqa: E402
from memory.embeddings import HashingEmbedding, reset_provider  # noqa: E402
from memory.fact_writes import assert_claim  # noqa: E402
from patients.csvimport import import_dispensing_csv  # noqa: E402
from patients.models import DispensingRecord, Patient  # noqa: E402
from patients.services import exposed_patients_for_recall  # noqa: E402
from recalls.ingest import parse_enforcement, recall_claims  # noqa: E402
from recalls.record_fields import Malformed  # noqa: E402

BULK_FILES = ("drug-enforcement-2021-04-28.json.zip", "drug-enforcement-2023-08-05-part.json.zip")
STYLES = ("brand", "generic", "abbrev")
LOT_VARIANTS = ("printed", "hyphen", "space", "lower", "prefix")
STRENGTH = re.compile(r"\b(\d+(?:\.\d+)?)\s?(mg|mcg|g|ml|%)\b", re.I)
FORMS = {"tablet": "TAB", "capsule": "CAP", "injection": "INJ", "solution": "SOL", "suspension": "SUSP",
         "cream": "CRM", "ointment": "OINT", "patch": "PATCH"}


def load_records(fixtures: Path) -> list[dict]:
    records, seen = [], set()
    for name in BULK_FILES:
        with zipfile.ZipFile(fixtures / name) as archive:
            for record in json.loads(archive.read(archive.namelist()[0]))["results"]:
                if record["recall_number"] not in seen:  # a file's first record of a number is the ingested one
                    seen.add(record["recall_number"])
                    records.append(record)
    return records


def package_ndc(record: dict, parsed) -> str:
    """The recalled pack: an NDC the record's own text names, else one of its openFDA package NDCs."""
    text = " ".join((record.get("product_description") or "", record.get("code_info") or ""))
    named = list(ndcs_in_text(text))
    for raw in named + list((record.get("openfda") or {}).get("package_ndc") or []):
        try:
            ndc = normalize_ndc(raw)
        except ValueError:
            continue
        if len(ndc) == 13:
            NDC_FROM[ndc] = "named in the record's text" if raw in named else "openFDA block only"
            return ndc
    return ""


SKIPPED = Counter()
NDC_FROM = {}  # package NDC -> where the sample took it from


def sample(records, n: int, rng: random.Random, *, block_only: int = 0):
    """(record, parsed, ndc, lots) for real Class I/II lot recalls with a package NDC and openFDA names
    (the names the brand and generic styles are typed from): n whose text names the pack's NDC, and up
    to `block_only` more whose NDC only openFDA's block lists (the text names none)."""
    chosen = []
    for record in records:
        openfda = record.get("openfda") or {}
        if record.get("classification") not in ("Class I", "Class II") or not openfda.get("generic_name"):
            continue
        try:
            parsed = parse_enforcement(record)
        except Malformed:
            SKIPPED["refused by ingestion (Malformed)"] += 1
            continue
        if parsed.scope != "lot":
            continue
        ndc = package_ndc(record, parsed)
        lots = [lot for lot in parsed.lots if len(canonical_lot(lot)) >= 4]
        if ndc and lots:
            chosen.append((record, parsed, ndc, lots))
    rng.shuffle(chosen)
    # One record per product and lot: two recalls of one pack (maker and distributor) would make
    # each other's holders look like false matches.
    picked, taken = [], set()
    wanted = {"named in the record's text": n, "openFDA block only": block_only}
    for item in chosen:
        key = (item[2][:10], canonical_lot(item[3][0]))
        source = NDC_FROM[item[2]]
        if key not in taken and wanted[source] > 0:
            taken.add(key)
            picked.append(item)
            wanted[source] -= 1
    return picked


def strength_form(description: str) -> tuple[str, str]:
    found = STRENGTH.search(description)
    strength = f"{found.group(1)} {found.group(2).lower()}" if found else ""
    lowered = description.lower()
    form = next((word for word in FORMS if word in lowered), "")
    return strength, form


def typed_name(style: str, record: dict) -> str:
    openfda = record["openfda"]
    strength, form = strength_form(record["product_description"])
    if style == "abbrev":
        words = re.findall(r"[A-Za-z]+", openfda["generic_name"][0])
        name = " ".join([words[0][:6]] + [w[:3] for w in words[1:3]]).upper()
        return " ".join(p for p in (name, strength.replace(" ", "").upper(), FORMS.get(form, "")) if p)
    name = (openfda.get("brand_name") or openfda["generic_name"])[0] if style == "brand" else openfda["generic_name"][0]
    return " ".join(p for p in (name.title(), strength, f"{form}s" if form else "") if p)


def printed_ndc(record: dict, ndc: str) -> str:
    """The NDC as printed on the pack (openFDA's 10-digit hyphenated form), as staff would type it."""
    for raw in (record.get("openfda") or {}).get("package_ndc") or []:
        try:
            if normalize_ndc(raw) == ndc:
                return raw
        except ValueError:
            continue
    return ndc


def typed_lot(variant: str, lot: str) -> str:
    middle = max(1, len(lot) // 2)
    return {"printed": lot, "hyphen": f"{lot[:middle]}-{lot[middle:]}", "space": f"{lot[:middle]} {lot[middle:]}",
            "lower": lot.lower(), "prefix": f"Lot# {lot}"}[variant]


def build(picked, rng):
    """CSV rows and what each patient is: (number, role, style, variant)."""
    rows, roles = [], {}
    all_lots = {canonical_lot(lot) for _, parsed, _, _ in picked for lot in parsed.lots}
    for i, (record, parsed, ndc, lots) in enumerate(picked):
        number = parsed.recall_number
        when = (parsed.valid_from - timedelta(days=30)).date().isoformat()
        lot = rng.choice(lots)

        def add(role, style, variant, name, row_ndc, row_lot, number=number, when=when):
            ref = f"BENCH-{number}-{role}-{style}-{variant}"
            roles[ref] = (number, role, style, variant)
            rows.append([ref, name, row_ndc, row_lot, "30", when])

        for style in STYLES:
            for variant in LOT_VARIANTS:
                add("holder", style, variant, typed_name(style, record), printed_ndc(record, ndc),
                    typed_lot(variant, lot))
        add("reference", "generic", "printed", typed_name("generic", record), ndc, lot)
        # The same holders without the NDC: what the name alone finds (how matching worked before the pack
        # decided it), for comparison only.
        for style in STYLES:
            add("name-only", style, "printed", typed_name(style, record), "", lot)
        # Another product: no shared ingredient and another NDC product (several recalls of one listing,
        # e.g. ChloraPrep 54365-400, would otherwise be each other's "decoys" and be rightly matched).
        other_record, other_parsed, other_ndc, _ = next(
            item for step in range(1, len(picked)) for item in [picked[(i + step) % len(picked)]]
            if not set(item[1].subject.split("+")) & set(parsed.subject.split("+")) and item[2][:10] != ndc[:10])
        add("decoy", "other-drug-same-lot", "-", typed_name("generic", other_record), other_ndc, lot)
        other_lot = next((x for x in sorted(other_parsed.lots) if canonical_lot(x) not in all_lots), "ZZ9999")
        add("decoy", "same-drug-other-lot", "-", typed_name("generic", record), ndc, other_lot)
        # This name and lot on another product's pack: the repackager rule may call it probable (a person
        # checks it), never confirmed.
        add("decoy", "other-product-ndc", "-", typed_name("generic", record), other_ndc, typed_lot("hyphen", lot))
    return rows, roles


def reset_database():
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE patients_dispensingrecord, patients_dispensingchange, patients_patient, "
                       "memory_fact RESTART IDENTITY CASCADE")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=150)
    parser.add_argument("--block-only", type=int, default=50,
                        help="also this many records whose NDC only openFDA's block lists (reported apart)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fixtures", type=Path, default=PROJECT_DIR / "tests" / "fixtures" / "openfda")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    reset_provider(HashingEmbedding(settings.UNSAY_EMBEDDING_DIM))
    reset_database()

    picked = sample(load_records(args.fixtures), args.records, rng, block_only=args.block_only)
    group_of = {parsed.recall_number: NDC_FROM[ndc] for _, parsed, ndc, _ in picked}
    began = time.monotonic()
    facts = 0
    for _, parsed, _, _ in picked:
        for claim in recall_claims(parsed, subject=parsed.subject, ndcs=parsed.ndcs):
            assert_claim(claim)
            facts += 1
    ingest_s = time.monotonic() - began

    rows, roles = build(picked, rng)
    Patient.objects.bulk_create([Patient(region="aws-us-east-1", display_name=f"Bench {ref} (synthetic)",
                                         external_ref=ref[:64], preferred_channel="email", synthetic=True)
                                 for ref in roles])
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["patient_ref", "drug", "ndc", "lot", "quantity", "dispensed_at"])
    writer.writerows(rows)
    began = time.monotonic()
    result = import_dispensing_csv(out.getvalue().encode(), actor="bench (csv)", synthetic=True)
    import_s = time.monotonic() - began
    if not result.ok:
        print("import refused:", [str(e) for e in result.errors[:10]])
        return 1

    found = {}  # ref -> class for the patient's own recall
    lookup_ms = []
    for _, parsed, _, _ in picked:
        began = time.perf_counter()
        exposures = exposed_patients_for_recall(parsed.recall_number)
        lookup_ms.append((time.perf_counter() - began) * 1000)
        for exposure in exposures:
            ref = exposure.patient.external_ref
            if roles.get(ref, ("",))[0] == parsed.recall_number:
                found[ref] = exposure.match_class

    reference_ms = []
    for _, _parsed, ndc, lots in picked:
        began = time.perf_counter()
        list(DispensingRecord.objects.filter(ndc_product=ndc[:10], lot__in=[canonical_lot(x) for x in lots])
             .select_related("patient"))
        reference_ms.append((time.perf_counter() - began) * 1000)

    per_style = defaultdict(Counter)
    misses = []
    decoys = Counter()
    decoy_examples = []
    for ref, (number, role, style, variant) in roles.items():
        klass = found.get(ref)
        exposed = klass in (MatchClass.CONFIRMED, MatchClass.PROBABLE)
        if role in ("holder", "reference", "name-only"):
            key = {"holder": style, "reference": "reference (generic, lot as printed)"}.get(
                role, f"reference: {style}, no NDC (name + lot)")
            if group_of[number] != "named in the record's text":
                key = f"NDC in openFDA block only: {key}"
            per_style[key]["holders"] += 1
            per_style[key]["found"] += exposed
            per_style[key]["confirmed"] += klass == MatchClass.CONFIRMED
            per_style[key][f"variant {variant} found"] += exposed
            if not exposed and role != "name-only" and len(misses) < 12:
                misses.append((number, style, variant, klass))
        else:
            decoys["decoys"] += 1
            decoys[f"{style} confirmed"] += klass == MatchClass.CONFIRMED
            decoys[f"{style} probable"] += klass == MatchClass.PROBABLE
            decoys["false confirmed"] += klass == MatchClass.CONFIRMED
            if klass == MatchClass.CONFIRMED and len(decoy_examples) < 8:
                decoy_examples.append((number, style))

    print(f"records: {len(picked)} real Class I/II recalls with lots and a package NDC; facts ingested: {facts} "
          f"({ingest_s:.1f} s); dispensing rows imported through the CSV import: {result.imported} ({import_s:.1f} s)")
    print("  package NDC of the sample:", dict(Counter(NDC_FROM[ndc] for _, _, ndc, _ in picked)))
    if SKIPPED:
        print("  candidates left out of the sample:", dict(SKIPPED))
    references = ["reference (generic, lot as printed)", *(f"reference: {s}, no NDC (name + lot)" for s in STYLES)]
    for key in (*STYLES, *references, *(f"NDC in openFDA block only: {k}" for k in (*STYLES, *references))):
        if key not in per_style:
            continue
        counts = per_style[key]
        print(f"  {key:70s} exposure recall {counts['found'] / max(1, counts['holders']):.3f} "
              f"({counts['found']}/{counts['holders']}), confirmed {counts['confirmed']}")
    for variant in LOT_VARIANTS:
        total = sum(counts[f"variant {variant} found"] for key, counts in per_style.items()
                    if key.split(": ")[-1] in STYLES)
        print(f"  lot typed {variant:8s} found {total}/{len(picked) * len(STYLES)}")
    print(f"decoys: {decoys['decoys']}, false confirmed {decoys['false confirmed']} (goal 0); by kind: "
          + ", ".join(f"{k} {v}" for k, v in sorted(decoys.items()) if k not in ("decoys", "false confirmed")))
    print(f"exposure lookup per recall: median {statistics.median(lookup_ms):.1f} ms, max {max(lookup_ms):.1f} ms; "
          f"reference, same run (bare ndc_product+lot query with patients): median "
          f"{statistics.median(reference_ms):.1f} ms")
    if misses:
        print("missed holders (recall, style, lot variant, class):", misses)
    if decoy_examples:
        print("false confirmed decoys:", decoy_examples)
    return 0


if __name__ == "__main__":
    started = datetime.now(UTC)
    code = main()
    print(f"ran {started:%Y-%m-%d %H:%M} UTC, {(datetime.now(UTC) - started).total_seconds():.0f} s")
    sys.exit(code)
