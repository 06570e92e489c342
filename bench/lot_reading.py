"""What reading lot fields and comparing product texts cost: the import of a dispensing file and the
deciding of a sweep page, each against the same work done the way it was done before, in the same run.

    .venv/bin/python bench/lot_reading.py [--rows 10000] [--page 200] [--runs 3]

Import: a CSV of --rows synthetic rows (over rows/3 synthetic patients) whose lot fields are REAL
recalled lots (2021 openFDA bulk file) typed in the shapes pharmacy systems store (a lot alone, with
its expiry after a word, in brackets or after a comma, a lot word before it, a GS1 element string,
digits that may be an expiry), some products named by brand or abbreviation, through
patients.csvimport.import_dispensing_csv. Reference: the same file with the lot field only made
canonical (drugs.lots.canonical_lot, as every field was before drugs.lot_field read it).

Sweep page: --page synthetic patients holding packs of real recalled products (valsartan and
hand-sanitizer recalls of the 2021 file, ingested here), their lot fields in the same shapes; one
page's beliefs (ask.beliefs.PageBeliefs) and a decision per patient (ask.services.decide), as a
set-based sweep page decides. Reference: the same page with drugs.matching.explain as it was before
it read the other lots of a field, recall product names and shared ingredients (EXPLAIN_BEFORE below).
The page's writes do not change with this work, so the ratio is of the deciding alone (an upper bound
for the whole page).

Runs alternate shipped and reference, --runs each, in one process on its own database
(UNSAY_DB_NAME, default unsay_bench_lot_reading); prints min / median / max and the ratio of medians.
"""

import argparse
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import setup_django  # noqa: E402

setup_django(db_name="unsay_bench_lot_reading", profile="test")

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

import drugs.matching as matching  # noqa: E402
import patients.models as patient_models  # noqa: E402
from ask import rules  # noqa: E402
from ask.beliefs import PageBeliefs  # noqa: E402
from ask.services import decide  # noqa: E402
from drugs import recall_terms  # noqa: E402
from drugs.identity import is_product_key, texts_agree  # noqa: E402
from drugs.lot_field import LotField, read_lot_field  # noqa: E402
from drugs.lots import canonical_lot, printed_lot  # noqa: E402
from memory.embeddings import get_provider  # noqa: E402
from memory.fact_writes import assert_claim  # noqa: E402
from patients import csvimport  # noqa: E402
from patients.dispensing import create_dispensings  # noqa: E402
from patients.models import DispensingRecord, Patient  # noqa: E402
from recalls.ingest import parse_enforcement, recall_claims  # noqa: E402
from recalls.lots.parse import parse_scope  # noqa: E402
from tests.factories import SNAPSHOT_2021, read_results  # noqa: E402

SHAPES = ["{lot}", "{lot}", "{lot}", "{lot} EXP 05/2026", "LOT# {lot}", "{lot} (05/26)", "{lot}, 2026-05",
          "(01)00303785814771(17)260531(10){lot}", "{lot}-0526", "lot {lower} exp may 2026", "L: {lot}"]
NAMES = [("Valsartan 160 mg tablets", "0378-5814-77"), ("DIOVAN 160MG TAB", ""), ("LOSART POT 50MG TAB", ""),
         ("artnaturals hand sanitizer", ""), ("Metformin ER 500 mg", "")]
SANITIZERS = ["D-0782-2022", "D-0780-2021", "D-0781-2021", "D-0030-2021", "D-0080-2021"]


def explain_before(fact, dispensing):
    """drugs.matching.explain before it read a field's other lots, recall product names and shared
    ingredients: the reference for the sweep page."""
    if not recall_terms.is_recall(fact):
        return None
    products = recall_terms.products(fact)
    product = matching.dispensing_product(dispensing)
    same_product = bool(product) and product in recall_terms.named_products(fact)
    listed_only = bool(product) and product in products and not same_product
    other_product = bool(product) and bool(products) and product not in products
    drug = getattr(dispensing, "drug", "") or ""
    drug_is_product = is_product_key(drug)
    same_drug = bool(fact.subject) and fact.subject == drug and not drug_is_product
    same_text = bool(fact.subject) and (drug_is_product or is_product_key(fact.subject)) \
        and texts_agree(fact.subject, drug)
    plausible = listed_only or (same_drug and not other_product)
    found = matching.Found
    klass = matching.MatchClass
    if fact.lot and not recall_terms.is_drug_level(fact):
        if not matching.lot_known(dispensing):
            if same_product or plausible or (same_text and not other_product):
                return found(klass.CANDIDATE, "same product, lot not recorded")
            return None
        exact, near = matching._near_rule(fact, dispensing)
        if not exact and near is None:
            return None
        if exact and same_product:
            return found(klass.CONFIRMED, "NDC product named by the recall, same lot")
        if exact and listed_only:
            return found(klass.PROBABLE, "NDC product listed for the recall by openFDA, same lot")
        if exact and same_drug:
            return found(klass.PROBABLE, "same ingredients and lot")
        if exact and same_text and not other_product:
            return found(klass.PROBABLE, "same product name and lot")
        if near and (same_product or listed_only or (same_drug and not other_product)):
            return found(klass.PROBABLE, f"lot near miss: {near}")
        return None
    if not matching.within_lot_scope(fact, dispensing):
        return None
    if same_product:
        return found(klass.PRODUCT_ALL_LOTS, "NDC product named by an all-lots recall")
    if plausible:
        return found(klass.CANDIDATE, "same ingredients, the recall covers all lots")
    if same_text and not other_product:
        return found(klass.CANDIDATE, "same product name, the recall covers all lots")
    return None


def canonical_only(text):
    """The lot field as it was read before drugs.lot_field: made canonical, nothing else."""
    return LotField(text=(text or "").strip(), lot=canonical_lot(text), printed=printed_lot(text))


def real_lots(count: int) -> list[str]:
    lots = set()
    for raw in read_results(SNAPSHOT_2021):
        scope = parse_scope(raw.get("code_info") or "", raw.get("more_code_info") or "")
        lots.update(printed_lot(lot) for lot in scope.lot_numbers if len(canonical_lot(lot)) >= 4)
    return random.Random(7).sample(sorted(lots), count)


def typed(rng, lot: str) -> str:
    return rng.choice(SHAPES).format(lot=lot, lower=lot.lower())


def make_file(rows: int) -> str:
    rng = random.Random(1)
    lots = real_lots(min(rows, 3000))
    patients = max(1, rows // 3)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE patients_dispensingchange, patients_dispensingrecord, patients_patient "
                       "RESTART IDENTITY CASCADE")
    Patient.objects.bulk_create([
        Patient(external_ref=f"LOTB-{i:07d}", display_name=f"Lot bench {i} (synthetic)",
                region=settings.UNSAY_REGIONS[i % len(settings.UNSAY_REGIONS)], email=f"lb{i}@example.com",
                synthetic=True) for i in range(patients)], batch_size=5000)
    lines = ["patient_ref,drug,ndc,lot,quantity,dispensed_at,site"]
    for i in range(rows):
        name, ndc = NAMES[i % len(NAMES)]
        lot = typed(rng, lots[i % len(lots)]).replace('"', "")
        day = f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00"
        lines.append(f'LOTB-{rng.randrange(patients):07d},{name},{ndc},"{lot}",30,{day},Bench (synthetic)')
    return "\n".join(lines) + "\n"


def clear_imported():
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE patients_dispensingchange, patients_dispensingrecord RESTART IDENTITY CASCADE")


def time_import(text: str) -> float:
    clear_imported()
    read_lot_field.cache_clear()  # each run reads its fields afresh, as a new file's would be
    began = time.perf_counter()
    result = csvimport.import_dispensing_csv(text, actor="bench")
    elapsed = time.perf_counter() - began
    assert result.ok, result.errors[:3]
    return elapsed


def build_page(size: int) -> tuple[list[Patient], list[tuple]]:
    """Real recalls ingested; `size` patients with one pack each of a recalled product, lot fields typed."""
    get_provider()  # the test profile's hashing embeddings
    by_number = {raw["recall_number"]: raw for raw in read_results(SNAPSHOT_2021)}
    valsartan = [n for n, raw in by_number.items() if "valsartan" in (raw.get("product_description") or "").lower()
                 and "lot" in (raw.get("code_info") or "").lower()][:12]
    lots = []
    for number in valsartan + [n for n in SANITIZERS if n in by_number]:
        parsed = parse_enforcement(by_number[number])
        for claim in recall_claims(parsed, subject=parsed.subject, ndcs=parsed.ndcs)[:20]:
            assert_claim(claim)
            if claim.lot:
                lots.append((claim.lot, parsed.subject, sorted(parsed.ndcs)[:1]))
    rng = random.Random(3)
    patients = Patient.objects.bulk_create([
        Patient(external_ref=f"PAGE-{i:05d}", display_name=f"Page bench {i} (synthetic)",
                region=settings.UNSAY_REGIONS[0], email=f"pb{i}@example.com", synthetic=True)
        for i in range(size)])
    records = []
    for i, patient in enumerate(patients):
        lot, subject, ndcs = lots[i % len(lots)]
        name = "artnaturals hand sanitizer" if subject != "valsartan" else "Valsartan 160 mg tablets"
        record = DispensingRecord(patient=patient, drug=name, ndc=ndcs[0] if ndcs and i % 2 else "",
                                  lot=typed(rng, lot), quantity=30, dispensed_at=datetime(2024, 2, 1, tzinfo=UTC))
        record.full_clean()
        records.append(record)
    create_dispensings(records, actor="bench")
    wanted = [(p.pk, DispensingRecord.objects.filter(patient=p).values_list("drug", flat=True).first())
              for p in patients]
    return patients, wanted


def time_page(patients, wanted) -> float:
    rules._MATCHES.clear()
    began = time.perf_counter()
    beliefs = PageBeliefs([p.pk for p in patients]).load_facts(wanted)
    for patient, (_pid, subject) in zip(patients, wanted, strict=True):
        decide(patient, "Is my medicine safe?", subject=subject, beliefs=beliefs)
    return time.perf_counter() - began


def figures(name: str, timings: list[float], unit: str) -> str:
    return (f"{name:<44} min {min(timings):7.3f}s  median {statistics.median(timings):7.3f}s  "
            f"max {max(timings):7.3f}s  ({unit})")


def alternate(shipped_run, reference_run, runs: int) -> tuple[list, list]:
    shipped, reference = [], []
    for _ in range(runs):
        shipped.append(shipped_run())
        reference.append(reference_run())
    return shipped, reference


def with_patch(module, name, value, run):
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        return run()
    finally:
        setattr(module, name, original)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--page", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    text = make_file(args.rows)
    time_import(text)  # warm-up: vocabulary, caches
    shipped, reference = alternate(
        lambda: time_import(text),
        lambda: with_patch(patient_models, "read_lot_field", canonical_only, lambda: time_import(text)), args.runs)
    print(f"import of {args.rows:,} rows ({args.runs} runs each, alternating)")
    print(figures("  lot fields read (shipped)", shipped, f"{args.rows / statistics.median(shipped):,.0f} rows/s"))
    print(figures("  reference: lot made canonical only", reference,
                  f"{args.rows / statistics.median(reference):,.0f} rows/s"))
    print(f"  ratio of medians: {statistics.median(shipped) / statistics.median(reference):.3f}")
    clear_imported()
    patients, wanted = build_page(args.page)
    time_page(patients, wanted)  # warm-up
    shipped, reference = alternate(
        lambda: time_page(patients, wanted),
        lambda: with_patch(matching, "explain", explain_before, lambda: time_page(patients, wanted)), args.runs)
    print(f"sweep page: {args.page} decisions over real recalls ({args.runs} runs each, alternating)")
    print(figures("  matching with field readings and names", shipped, "shipped"))
    print(figures("  reference: matching as before", reference, "same page"))
    print(f"  ratio of medians: {statistics.median(shipped) / statistics.median(reference):.3f}")
    print(f"load average after: {' '.join(f'{v:.1f}' for v in __import__('os').getloadavg())}")


if __name__ == "__main__":
    main()
