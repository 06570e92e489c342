"""Pharmacy abbreviations (drugs.abbreviations) measured on real recall texts and synthetic till strings
(no database).

    .venv/bin/python bench/abbreviations.py [--fixtures tests/fixtures/openfda] [--show 40]

1. Recall texts: every product_description and openfda.generic_name of the 2021 bulk file. Recall
   subjects are read by drugs.identity.resolve, which never reads the table; this counts how many of
   these texts would read differently if they went through resolve_dispensed (the dispensing reading),
   split into texts that already resolved and texts that did not.
2. A truncation rule measured and not adopted: complete any token of five letters or more that begins
   exactly one ingredient name of the vocabulary (and is not itself a word of one, nor a form, salt or
   filler word), only in a text that names no ingredient once spelled out. Counts the recall texts it
   would change and lists them (--show) so its readings can be judged.
3. Till strings (tests/fixtures/synthetic_till_strings.csv, synthetic pharmacy print names, each with the
   name FDA gives the drug): how many get the identity key of FDA's name before (identity_key as it was:
   resolve, else the product key) and after (identity_key, which spells abbreviations out).
"""

import argparse
import bisect
import csv
import json
import sys
import time
import zipfile
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from drugs import abbreviations  # noqa: E402
from drugs.identity import (  # noqa: E402
    _PRODUCT_FILLER,
    _known_ingredients,
    identity_key,
    product_key,
    resolve,
    resolve_dispensed,
    vocabulary,
)

BULK_2021 = "drug-enforcement-2021-04-28.json.zip"
TILL_STRINGS = PROJECT_DIR / "tests" / "fixtures" / "synthetic_till_strings.csv"


def recall_texts(fixtures: Path) -> list[str]:
    with zipfile.ZipFile(fixtures / BULK_2021) as archive:
        records = json.loads(archive.read(archive.namelist()[0]))["results"]
    texts = []
    for record in records:
        texts.append(record.get("product_description") or "")
        texts += [name for name in (record.get("openfda") or {}).get("generic_name") or [] if isinstance(name, str)]
    return [text for text in texts if text.strip()]


def key_before(text: str) -> str:
    """identity_key of one text as it was before the table: resolve, else the product key."""
    return resolve(text).key or product_key(text)


class UniquePrefixRule:
    """The truncation rule measured here: a token of at least five letters, not in the table, not a
    form, salt or filler word, not itself a word of any ingredient name, that begins exactly one
    ingredient name of the vocabulary, is completed to that name."""

    def __init__(self):
        self.names = sorted(_known_ingredients())
        self.name_words = {word for name in self.names for word in name.split()}

    def completion(self, token: str) -> str | None:
        token = token.lower()
        if (len(token) < 5 or not token.isalpha() or token.upper() in abbreviations.table()
                or token in _PRODUCT_FILLER or token in self.name_words):
            return None
        first = bisect.bisect_left(self.names, token)
        matches = [name for name in self.names[first:first + 2] if name.startswith(token)]
        return matches[0] if len(matches) == 1 else None

    def reading(self, text: str) -> tuple[str, str]:
        """(key the rule gives a text that names no ingredient once spelled out, the completions)."""
        spelled = abbreviations.spell_out(text, vocabulary())
        if resolve(spelled).resolved:
            return "", ""
        completions = [(match, self.completion(match.group())) for match in abbreviations._TOKEN.finditer(spelled)]
        completions = [(match, name) for match, name in completions if name]
        if not completions:
            return "", ""
        completed = spelled
        for match, name in reversed(completions):
            completed = completed[:match.start()] + name + completed[match.end():]
        return resolve(completed).key, ", ".join(f"{match.group()}->{name}" for match, name in completions)


def measure_recall_texts(texts: list[str], show: int) -> None:
    resolved_changed, unresolved_changed = [], []
    for text in texts:
        before, after = resolve(text), resolve_dispensed(text)
        if before.key != after.key:
            (resolved_changed if before.resolved else unresolved_changed).append((text, before.key, after.key))
    print(f"recall texts (product_description + openfda.generic_name, 2021 bulk file): {len(texts):,}")
    print("  recall path (resolve): changed 0 by construction; it never reads the table")
    print(f"  if they were read as dispensing text (resolve_dispensed): {len(resolved_changed)} resolved texts "
          f"would change key, {len(unresolved_changed)} unresolved texts would resolve")
    for text, before, after in resolved_changed[:show]:
        print(f"    {before:30.30} -> {after:40.40} | {text[:80]}")
    for text, _before, after in unresolved_changed[:show]:
        print(f"    {'(unresolved)':30.30} -> {after:40.40} | {text[:80]}")


def measure_unique_prefix_rule(texts: list[str], show: int) -> None:
    rule = UniquePrefixRule()
    changed = []
    for text in texts:
        key, completions = rule.reading(text)
        if key:
            changed.append((text, key, completions))
    print(f"unique-prefix truncation rule (not adopted): would change {len(changed)} recall texts "
          f"({len({c for _, _, c in changed})} distinct readings); none of them resolved before")
    for text, key, completions in changed[:show]:
        print(f"    {completions:45.45} -> {key:30.30} | {text[:70]}")


def measure_till_strings(show: int) -> None:
    with TILL_STRINGS.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    before = after = 0
    missed = []
    for row in rows:
        expected = resolve(row["fda_name"]).key
        before += key_before(row["till_text"]) == expected
        got = identity_key(row["till_text"])[0]
        after += got == expected
        if got != expected:
            missed.append((row["till_text"], expected, got))
    print(f"till strings (synthetic): {len(rows)}; identity key equal to FDA's name's: "
          f"before {before}, after {after}")
    for text, expected, got in missed[:show]:
        print(f"    missed: {text!r}: expected {expected!r}, got {got!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, default=PROJECT_DIR / "tests" / "fixtures" / "openfda")
    parser.add_argument("--show", type=int, default=20, help="texts to list per group (0: counts only)")
    args = parser.parse_args()
    started = time.perf_counter()
    vocabulary()
    print(f"vocabulary loaded in {time.perf_counter() - started:.1f} s; table: {len(abbreviations.table())} "
          f"entries ({sum(entry.expands for entry in abbreviations.table().values())} expanded)")
    texts = recall_texts(args.fixtures)
    measure_recall_texts(texts, args.show)
    measure_unique_prefix_rule(texts, args.show)
    measure_till_strings(args.show)


if __name__ == "__main__":
    main()
