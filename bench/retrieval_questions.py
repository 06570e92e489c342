"""Build the labelled retrieval questions (tests/fixtures/retrieval_questions.json) from the real openFDA
bulk file: questions a patient or pharmacist asks, each with the recall facts a pharmacist would want read,
labelled by a rule over the records' own fields, never by what the system retrieves.

    .venv/bin/python bench/retrieval_questions.py            # writes the fixture (deterministic)
    .venv/bin/python bench/retrieval_questions.py --check    # fails if the committed fixture differs

Three kinds, 40 of each, from records taken in a fixed shuffled order (one question per drug and kind):

- reason: "Is there a recall of <drug> for <reason>?" with <reason> the first clause of the record's
  reason_for_recall. Relevant: every record whose product description starts with the same drug word and
  whose reason starts with the same clause.
- symptom: a patient's words for what they see (particles, discoloration, a strange smell, ...), chosen by a
  keyword of the record's reason_for_recall (SYMPTOMS). Relevant: every record of the same drug word whose
  reason has the keyword.
- lot: "Is lot <lot> of <drug> recalled?" with a lot the record's code_info names (recalls.ingest's parser,
  which is what makes lot facts). Relevant: that record's fact for that lot, and its drug-level fact if any.

A question's label is a list of [recall_number, lot-or-null] pairs: a retrieved fact is relevant when its
recall number matches and (lot questions) its lot does too, or it has none. The drug word is the first word
of product_description that is a drug name somewhere in the file (a word of some record's openfda
generic_name or brand_name): what a patient reads on the pack. No symptom keyword gives more than
SYMPTOM_CAP questions, so the most common reason (sterility) does not crowd out the others.
"""

import argparse
import json
import os
import random
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SOURCE = ROOT / "tests/fixtures/openfda/drug-enforcement-2021-04-28.json.zip"
OUT = ROOT / "tests/fixtures/retrieval_questions.json"
PER_KIND = 40
SYMPTOM_CAP = 6
SEED = 20210428  # the bulk file's publication date: any fixed seed would do

# keyword of reason_for_recall -> a patient's question about what they notice
SYMPTOMS = {
    "particulate": "I found particles floating in my {drug}, is it safe?",
    "discolor": "My {drug} looks discolored, has it been recalled?",
    "subpotent": "My {drug} does not seem to work as well as before, is it weaker than it should be?",
    "superpotent": "Could my {drug} be stronger than the label says?",
    "dissolution": "Is there a problem with {drug} not dissolving properly?",
    "sterility": "Could my {drug} be not sterile?",
    "microbial": "Could my {drug} be contaminated with bacteria or mold?",
    "ndma": "Does my {drug} contain a cancer-causing impurity like NDMA?",
    "mislabel": "The label on my {drug} looks wrong, was it mislabeled?",
    "odor": "My {drug} smells strange, is something wrong with it?",
    "crystal": "I see crystals in my {drug}, is that a known problem?",
    "leak": "My {drug} container is leaking, is it recalled?",
    "impurit": "Does my {drug} have an impurity problem?",
    "foreign": "I found something foreign in my {drug}, is there a recall?",
}
_CLAUSE = re.compile(r"[:;.(]| - ")
_WORD = re.compile(r"[a-z]{4,}")
FORMS = {"tablets", "tablet", "capsules", "capsule", "injection", "solution", "oral", "sodium", "hydrochloride",
         "extended", "release", "cream", "ointment", "suspension", "topical", "sterile", "water"}


def drug_names(records) -> set[str]:
    """Every word (four letters or more, not a dosage form or salt) of an openfda generic or brand name."""
    names = set()
    for r in records:
        openfda = r.get("openfda") or {}
        for value in (openfda.get("generic_name") or []) + (openfda.get("brand_name") or []):
            names.update(_WORD.findall(value.lower()))
    return names - FORMS


def drug_word(record: dict, names: set[str]) -> str:
    """The first word of the product description that is a drug name, or ""."""
    return next((w for w in _WORD.findall((record.get("product_description") or "").lower()) if w in names), "")


def reason_clause(record: dict) -> str:
    reason = " ".join((record.get("reason_for_recall") or "").split())
    clause = _CLAUSE.split(reason, maxsplit=1)[0].strip().lower()
    words = clause.split()
    return " ".join(words) if 2 <= len(words) <= 8 else ""


def symptom_of(record: dict) -> str:
    reason = (record.get("reason_for_recall") or "").lower().replace("-", "")
    return next((key for key in SYMPTOMS if key in reason), "")


def load_records() -> list[dict]:
    with zipfile.ZipFile(SOURCE) as zf:
        return json.loads(zf.read(zf.namelist()[0]))["results"]


def build() -> dict:
    os.environ.setdefault("UNSAY_PROFILE", "test")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")
    import django

    django.setup()
    from recalls.ingest import parse_enforcement

    everything = load_records()
    names = drug_names(everything)
    records = [r for r in everything if r.get("recall_number") and drug_word(r, names)]
    by_drug: dict[str, list[dict]] = {}
    for r in records:
        by_drug.setdefault(drug_word(r, names), []).append(r)
    order = list(records)
    random.Random(SEED).shuffle(order)
    questions, used, symptoms = [], {"reason": set(), "symptom": set(), "lot": set()}, {}

    def add(kind, drug, text, relevant, source):
        if len([q for q in questions if q["kind"] == kind]) >= PER_KIND or drug in used[kind]:
            return
        used[kind].add(drug)
        questions.append({"id": f"{kind}-{len(used[kind]):02d}", "kind": kind, "question": text,
                          "from_record": source, "relevant": sorted(relevant, key=lambda p: (p[0], p[1] or ""))})

    for r in order:
        drug, number = drug_word(r, names), r["recall_number"]
        clause = reason_clause(r)
        if clause:
            relevant = {(o["recall_number"], None) for o in by_drug[drug] if reason_clause(o) == clause}
            add("reason", drug, f"Is there a recall of {drug} for {clause}?", relevant, number)
        symptom = symptom_of(r)
        if symptom and symptoms.get(symptom, 0) < SYMPTOM_CAP and drug not in used["symptom"]:
            symptoms[symptom] = symptoms.get(symptom, 0) + 1
            relevant = {(o["recall_number"], None) for o in by_drug[drug] if symptom_of(o) == symptom}
            add("symptom", drug, SYMPTOMS[symptom].format(drug=drug), relevant, number)
        try:
            parsed = parse_enforcement(r)
        except Exception:  # noqa: BLE001 - a record the ingest quarantines has no facts to ask about
            continue
        if parsed.scope == "lot" and parsed.lots:
            lot = parsed.lots[0]
            add("lot", drug, f"Is lot {lot} of {drug} recalled?", {(number, lot)}, number)
    kinds = {kind: sum(q["kind"] == kind for q in questions) for kind in used}
    if min(kinds.values()) < PER_KIND:
        raise SystemExit(f"too few questions of some kind: {kinds}")
    return {"source": SOURCE.name, "rule": __doc__.split("\n\n", 2)[2].strip(), "questions": questions}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed fixture, write nothing")
    args = parser.parse_args()
    text = json.dumps(build(), indent=1, ensure_ascii=False) + "\n"
    if args.check:
        if OUT.read_text() != text:
            raise SystemExit(f"{OUT} is not what this script builds; run it without --check")
        print(f"{OUT} is up to date")
        return
    OUT.write_text(text)
    print(f"wrote {OUT} ({text.count(chr(10))} lines)")


if __name__ == "__main__":
    main()
