"""Drug identity and match classes on real openFDA recalls (no database).

    .venv/bin/python bench/identity.py [--fixtures ../shared/fixtures/openfda] [--seed 1]

1. Identity of every recall of the 2021 bulk file + the 2023 part (recalls.record_identity.identity_of): counts
   resolved / unresolved / combination, by source, disagreements flagged, and the number of subjects
   carrying dosage-form, packaging, NDC or labeler words (goal 0).
2. A matching test set from real records with an `openfda` block, package NDCs and lots: a synthetic
   dispensing printed as a pharmacy would ("<brand or generic> <strength> <form>"), one of the record's
   package NDCs and one of its lots, must be found for that recall as *confirmed*; the same description
   and NDC with a lot of another firm's recall of the same ingredient must not be. Prints precision and
   recall of confirmed matches (goal: recall 1.00, precision >= 0.99) and timing (min/median/max of
   resolve() per text, with a same-run reference: a dict lookup per text).
"""

import argparse
import json
import random
import re
import statistics
import sys
import time
import zipfile
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from drugs.identity import resolve, vocabulary  # noqa: E402
from drugs.matching import MatchClass, match  # noqa: E402
from drugs.ndc import ndcs_in_text, normalize_ndc  # noqa: E402

BULK_FILES = ("drug-enforcement-2021-04-28.json.zip", "drug-enforcement-2023-08-05-part.json.zip")
# Words that must never be part of a subject (junk subjects once seen in stored facts).
FORM_PACKAGING_NDC = set(
    "tab tabs tablet tablets capsule capsules caplet caplets usp injection oral solution suspension count "
    "bottle bottles blister carton cartons pack packs unit dose ndc upc rx only mg mcg ml vial vials "
    "manufactured distributed mfd mfg inc llc corp ltd pharmaceuticals pharma laboratories labs".split())


def load_records(fixtures: Path) -> list[dict]:
    records = []
    for name in BULK_FILES:
        with zipfile.ZipFile(fixtures / name) as archive:
            records += json.loads(archive.read(archive.namelist()[0]))["results"]
    return records


def labeler_words(records) -> set[str]:
    """Words of recalling firm names that are not words of any ingredient name."""
    ingredient_words = {w for parts in vocabulary().values() for part in parts for w in part.split()}
    words = set()
    for record in records:
        for word in re.findall(r"[a-z]+", (record.get("recalling_firm") or "").lower()):
            if len(word) > 3 and word not in ingredient_words:
                words.add(word)
    return words


def identity_counts(records, parsed) -> dict:
    from recalls.record_identity import identity_of

    counts = Counter()
    by_source = Counter()
    bad_words = FORM_PACKAGING_NDC | labeler_words(records)
    junk = []
    subjects = set()
    for record in records:
        identity = identity_of(record)
        counts["records"] += 1
        by_source[identity.source] += 1
        if identity.subject:
            counts["resolved"] += 1
            subjects.add(identity.subject)
            if "+" in identity.subject:
                counts["combination"] += 1
            words = set(re.findall(r"[a-z]+", identity.subject))
            if words & bad_words:
                junk.append((record["recall_number"], identity.subject, sorted(words & bad_words)))
        else:
            counts["unresolved"] += 1
        if identity.flag and identity.subject:
            counts["flagged_disagreement"] += 1
    counts["distinct_subjects"] = len(subjects)
    counts["subjects_with_form_packaging_ndc_or_labeler_words"] = len(junk)
    return {"counts": dict(counts), "by_source": dict(by_source), "junk_examples": junk[:20]}


STRENGTH = re.compile(r"\b(\d+(?:\.\d+)?\s?(?:mg|mcg|g|ml|%)(?:\s?/\s?\d+(?:\.\d+)?\s?(?:mg|mcg|ml))?)", re.I)
FORMS = ("tablets", "tablet", "capsules", "capsule", "injection", "solution", "suspension", "cream", "ointment")


def pharmacy_text(name: str, description: str) -> str:
    strength = STRENGTH.search(description)
    form = next((f for f in FORMS if f in description.lower()), "")
    return " ".join(p for p in (name.title(), strength.group(1) if strength else "", form) if p)


def facts_of(parsed_record):
    from recalls.ingest import recall_claims

    return [SimpleNamespace(kind=c.kind, subject=c.subject, lot=c.lot, attributes=c.attributes, fact_key=c.fact_key)
            for c in recall_claims(parsed_record, subject=parsed_record.subject, ndcs=parsed_record.ndcs)]


def matching_set(records, parsed_by_number, rng):
    """(positives, negatives): (dispensing, recall_number, event_id)."""
    by_subject = defaultdict(list)
    for parsed in parsed_by_number.values():
        if parsed.subject and parsed.scope == "lot":
            by_subject[parsed.subject].append(parsed)
    positives, negatives = [], []
    for record in records:
        parsed = parsed_by_number.get(record["recall_number"])
        openfda = record.get("openfda") or {}
        if parsed is None or parsed.scope != "lot" or not openfda.get("package_ndc") or not parsed.ndcs:
            continue
        if not parsed.identity.get("identity_source") or "identity_flag" in parsed.identity:
            continue
        names = (openfda.get("brand_name") or []) + (openfda.get("generic_name") or [])
        name = rng.choice(names)
        text = pharmacy_text(name, record["product_description"])
        packages = [n for n in parsed.ndcs if len(n) == 13]
        # The pack a pharmacy dispensed is the recalled one: prefer the NDCs the record's own text names
        # (openFDA's block lists every strength of the listing, also those not recalled).
        own = [n for n in packages if n in set(ndcs_in_text(" ".join(
            (record.get("product_description") or "", record.get("code_info") or ""))))]
        packages = own or packages
        if not packages:
            continue
        ndc = normalize_ndc(rng.choice(packages))
        lot = rng.choice(parsed.lots)
        drug = resolve(text).key
        positives.append((SimpleNamespace(drug=drug, ndc=ndc, lot=lot, lot_known=True, text=text),
                          parsed.recall_number, record.get("event_id")))
        # Another manufacturer: another firm name and none of this recall's NDC labelers (the same firm is
        # spelled "Noven Pharmaceuticals, Inc." and "Noven Pharmaceuticals Inc" in two recalls).
        labelers = {n[:5] for n in parsed.ndcs}
        others = [p for p in by_subject.get(parsed.subject, [])
                  if p.attributes.get("firm") != parsed.attributes.get("firm")
                  and not labelers & {n[:5] for n in p.ndcs}]
        other_lots = [lot for p in others for lot in p.lots if lot not in parsed.lots]
        if other_lots:
            negatives.append((SimpleNamespace(drug=drug, ndc=ndc, lot=rng.choice(other_lots), lot_known=True,
                                              text=text), parsed.recall_number, record.get("event_id")))
    return positives, negatives


def names_product_and_lot(text: str, dispensing) -> bool:
    digits = re.sub(r"\D", "", text)
    # The 11-digit 5-4-2 form pads one segment of the 10-digit forms printed on labels: 4-4-2 pads the
    # labeler, 5-3-2 the product (55910-092-79 is 55910-0092-79).
    labeler, product = dispensing.ndc[:5], dispensing.ndc[6:10]
    shapes = {labeler + product}
    if labeler.startswith("0"):
        shapes.add(labeler[1:] + product)
    if product.startswith("0"):
        shapes.add(labeler + product[1:])
    return any(shape in digits for shape in shapes) and dispensing.lot.lower() in text.lower()


def evaluate(positives, negatives, facts_by_lot, event_of, texts, listed, lots_of):
    tp = fp = fn = second_recall = same_listing = 0
    misses, false_hits = [], []
    for dispensing, number, event in positives:
        confirmed = {(recall_of(f), f.lot) for f in facts_by_lot.get(dispensing.lot, [])
                     if match(f, dispensing) == MatchClass.CONFIRMED}
        if any(n == number for n, _ in confirmed):
            tp += 1
        else:
            fn += 1
            misses.append((number, dispensing.text, dispensing.ndc, dispensing.lot))
        # Another recall of the same event naming the same product and lot is a true match too; so is
        # another recall whose own text (description, code_info) names this NDC product and this lot
        # (a product and lot recalled twice, e.g. by the maker and by the distributor).
        for other, _ in confirmed:
            if other == number or event_of.get(other) == event:
                continue
            if names_product_and_lot(texts[other], dispensing):
                second_recall += 1
            else:
                fp += 1
                if dispensing.ndc in listed[other] and dispensing.lot in lots_of[other]:
                    same_listing += 1
                else:
                    false_hits.insert(0, (number, other, dispensing.text, dispensing.ndc, dispensing.lot))
                    continue
                false_hits.append((number, other, dispensing.text))
    negative_hits = 0
    for dispensing, number, _event in negatives:
        for fact in facts_by_lot.get(dispensing.lot, []):
            if recall_of(fact) == number and match(fact, dispensing) is not None:
                negative_hits += 1
            elif match(fact, dispensing) == MatchClass.CONFIRMED:
                if names_product_and_lot(texts[recall_of(fact)], dispensing):
                    second_recall += 1
                else:
                    fp += 1
                    other = recall_of(fact)
                    same_listing += dispensing.ndc in listed[other] and dispensing.lot in lots_of[other]
                    false_hits.append((number, recall_of(fact), dispensing.text))
    return {"also_confirmed_by_a_second_recall_naming_product_and_lot": second_recall,
            "positives": len(positives), "negatives": len(negatives), "true_confirmed": tp, "missed": fn,
            "false_confirmed": fp, "negatives_matched_by_their_recall": negative_hits,
            "recall": round(tp / max(1, tp + fn), 4), "precision": round(tp / max(1, tp + fp), 4),
            "of_which_other_recall_lists_this_package_ndc_in_openfda_and_this_lot": same_listing,
            "miss_examples": misses[:10], "false_examples": false_hits[:10]}


def _safe_ndc(raw) -> str:
    try:
        return normalize_ndc(raw)
    except ValueError:
        return ""


def recall_of(fact) -> str:
    return fact.attributes.get("recall_number", "")


def timing(texts) -> dict:
    resolve.cache_clear()
    durations, reference = [], []
    table = {t: t for t in texts}
    for text in texts:
        began = time.perf_counter()
        resolve(text)
        durations.append((time.perf_counter() - began) * 1e6)
        began = time.perf_counter()
        table.get(text)
        reference.append((time.perf_counter() - began) * 1e6)
    return {"resolve_us": {"min": round(min(durations), 1), "median": round(statistics.median(durations), 1),
                           "max": round(max(durations), 1)},
            "reference_dict_lookup_us": {"min": round(min(reference), 2),
                                         "median": round(statistics.median(reference), 2),
                                         "max": round(max(reference), 2)}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, default=PROJECT_DIR.parent / "shared" / "fixtures" / "openfda")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not (args.fixtures / BULK_FILES[0]).exists():
        args.fixtures = Path("/work/shared/fixtures/openfda")
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")
    os.environ.setdefault("UNSAY_PROFILE", "test")
    import django

    django.setup()
    from recalls.ingest import parse_enforcement
    from recalls.record_fields import Malformed

    began = time.perf_counter()
    vocabulary()
    load_s = time.perf_counter() - began
    records = load_records(args.fixtures)
    parsed_by_number, malformed = {}, 0
    for record in records:
        try:
            parsed_by_number.setdefault(record["recall_number"], parse_enforcement(record))
        except Malformed:
            malformed += 1
    print(f"vocabulary load: {load_s:.2f} s; records: {len(records)} ({malformed} malformed, not counted below)")
    print("identity:", json.dumps(identity_counts(records, parsed_by_number), indent=1))
    facts_by_lot = defaultdict(list)
    for parsed in parsed_by_number.values():
        for fact in facts_of(parsed):
            if fact.lot:
                facts_by_lot[fact.lot].append(fact)
    event_of = {n: p.attributes.get("event_id") for n, p in parsed_by_number.items()}
    texts = {r["recall_number"]: " ".join((r.get("product_description") or "", r.get("code_info") or "",
                                           r.get("more_code_info") or "")) for r in records}
    positives, negatives = matching_set(records, parsed_by_number, random.Random(args.seed))
    listed = {r["recall_number"]: {n for n in ((r.get("openfda") or {}).get("package_ndc") or [])
                                   for n in [_safe_ndc(n)] if n} for r in records}
    lots_of = {n: set(p.lots) for n, p in parsed_by_number.items()}
    figures = evaluate(positives, negatives, facts_by_lot, event_of, texts, listed, lots_of)
    print("matching (confirmed class):", json.dumps(figures, indent=1))
    print("timing:", json.dumps(timing([r.get("product_description") or "" for r in records[:3000]])))


if __name__ == "__main__":
    main()
