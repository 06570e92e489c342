"""How well a typed product text finds the recall it names, when no vocabulary knows the product:
drugs.identity.texts_agree (shipped) beside trigram similarity as PostgreSQL's pg_trgm computes it.

    .venv/bin/python bench/product_text_match.py [--threshold 0.3]

Real records: every recall of the 2021 bulk file and the 2023 part whose product is one the vocabulary
cannot name or whose subject names an ingredient its description does not start with (homeopathics,
hand sanitizers, supplements, kits). For each, the texts a pharmacy would type (synthetic): the first
two naming words of its description, its first naming word with a form, and its openFDA brand name
when it has one, as dispensing rows store them (a product key). Positives: each typed text against its
own recall's product names. Negatives: each typed text against every other such recall whose product
names share no distinctive first word with it but share a word (the hard decoys: another brand of hand
sanitizer). Prints agreement on positives (recall) and on negatives (false agreements) for both rules,
and the time per comparison.
"""

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import setup_django  # noqa: E402

setup_django(db_name="unsay_bench_product_text", profile="test", migrate=False)

from drugs.identity import distinctive_first_word, identity_key, product_words, texts_agree  # noqa: E402
from recalls.ingest import parse_enforcement  # noqa: E402
from recalls.record_fields import Malformed  # noqa: E402
from recalls.record_identity import product_names_of  # noqa: E402
from tests.factories import SNAPSHOT_2021, SNAPSHOT_2023, read_results  # noqa: E402


def trigrams(text: str) -> set[str]:
    """pg_trgm's trigrams: lower-case alphanumeric words, each padded with two spaces before, one after."""
    found = set()
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        padded = f"  {word} "
        found.update(padded[i:i + 3] for i in range(len(padded) - 2))
    return found


def similarity(a: str, b: str) -> float:
    ta, tb = trigrams(a), trigrams(b)
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


def typed_texts(raw: dict) -> list[str]:
    words = product_words(raw.get("product_description") or "")
    typed = []
    if len(words) >= 2:
        typed.append(" ".join(words[:2]))
    if words:
        typed.append(f"{words[0]} tablets")
    for brand in (raw.get("openfda") or {}).get("brand_name") or []:
        typed.append(brand)
    return typed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threshold", type=float, default=0.3, help="pg_trgm's default similarity threshold")
    args = parser.parse_args()
    recalls = {}
    for path in (SNAPSHOT_2021, SNAPSHOT_2023):
        for raw in read_results(path):
            try:
                parsed = parse_enforcement(raw)
            except Malformed:
                continue
            names = product_names_of(raw)
            first = distinctive_first_word(names[0]) if names else ""
            reduced = parsed.subject and not parsed.subject.startswith("product:") and first \
                and not any(first.startswith(part.split()[0][:5]) for part in parsed.subject.split("+"))
            if names and first and (parsed.subject.startswith("product:") or not parsed.subject or reduced):
                recalls.setdefault(raw["recall_number"], (names, typed_texts(raw)))
    cases = []
    for number, (_names, typed) in recalls.items():
        for text in typed:
            key = identity_key(text)[0]
            if key.startswith("product:"):
                cases.append((number, key, text))
    by_first = {number: {distinctive_first_word(n) for n in names} - {""} for number, (names, _) in recalls.items()}
    words = {number: {w for n in names for w in product_words(n)} for number, (names, _) in recalls.items()}
    shipped_pos = trigram_pos = 0
    shipped_neg = trigram_neg = negatives = 0
    timings = []
    for number, key, text in cases:
        names = recalls[number][0]
        shipped_pos += any(texts_agree(name, key) for name in names)
        trigram_pos += any(similarity(name, text) >= args.threshold for name in names)
        typed_first = distinctive_first_word(key)
        for other, (other_names, _) in recalls.items():
            if other == number or typed_first in by_first[other] or not (set(product_words(text)) & words[other]):
                continue
            if recalls[other][0] == names:
                continue
            negatives += 1
            began = time.perf_counter()
            shipped_neg += any(texts_agree(name, key) for name in other_names)
            timings.append(time.perf_counter() - began)
            trigram_neg += any(similarity(name, text) >= args.threshold for name in other_names)
    print(f"{len(recalls)} real recalls of products the vocabulary cannot name (or reduced to an ingredient); "
          f"{len(cases)} typed texts; {negatives} hard decoy pairs (a shared word, another product)")
    print(f"  texts_agree (shipped):          found {shipped_pos}/{len(cases)} ({shipped_pos / len(cases):.1%}), "
          f"false agreements {shipped_neg}/{negatives} ({shipped_neg / max(negatives, 1):.2%})")
    print(f"  trigram similarity >= {args.threshold}:   found {trigram_pos}/{len(cases)} "
          f"({trigram_pos / len(cases):.1%}), false agreements {trigram_neg}/{negatives} "
          f"({trigram_neg / max(negatives, 1):.2%})")
    if timings:
        print(f"  texts_agree per decoy pair: median {statistics.median(timings) * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
