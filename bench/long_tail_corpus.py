"""Writes the long-tail acceptance corpus: labelled synthetic dispensing rows over real openFDA recalls.

    .venv/bin/python bench/long_tail_corpus.py [--seed 20261205] [--out tests/fixtures/long_tail_corpus.json]

The corpus is the yardstick of tests/acceptance/test_long_tail_corpus.py: how pharmacies really record what
they dispensed (lots with their expiry, prefixes, GS1 strings, stray punctuation; brands nobody's vocabulary
knows; repackagers' NDCs under pharmacy abbreviations; expiry and distribution windows; all-lots recalls;
near-miss lots), through every entry path (admin form, CSV, API, FHIR MedicationDispense, GS1 scan).

Recalls are REAL openFDA enforcement records (tests/fixtures/openfda/), chosen by class, never one by one:
each record is read with the product's own code (recalls.ingest.parse_enforcement: its lot scope, its
identity attributes and NDCs), and a lot is used only if it is also written in the record's own code_info.
Patients and dispensing are SYNTHETIC (refs "SYN-LT-…"). Each row is labelled: a *holder* of the recalled
pack (must be found in any match class, never told "safe", a notice drafted when the recall is open) or a
*decoy* of a named kind (what is acceptable for each kind is in the corpus' `decoy_kinds`), or *malformed*
(a path must refuse it with a clear error and write nothing; its corrected entry is then a holder).

Typed shapes come from a seeded grammar (the families below). Some shapes of each family are held out:
their rows carry an opaque shape id ("<family>/held-out-N"), so reports name only their class.
Deterministic: the same seed and fixtures give the same file.
"""

import argparse
import calendar
import hashlib
import json
import os
import random
import re
import sys
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))
OPENFDA = PROJECT_DIR / "tests" / "fixtures" / "openfda"
SOURCES = {  # snapshot name -> file; the newest first (they are preferred when choosing)
    "recent": "drug-enforcement-recent-sample.json",
    "2023": "drug-enforcement-2023-08-05-part.json.zip",
    "2021": "drug-enforcement-2021-04-28.json.zip",
}
DEFAULT_OUT = PROJECT_DIR / "tests" / "fixtures" / "long_tail_corpus.json"
PATHS = ("admin", "csv", "api", "fhir", "scan")
HOLDER_CLASSES = ("confirmed", "probable", "product_all_lots", "candidate")
CLOSED = ("Terminated", "Completed")

# --- what is acceptable, per label ------------------------------------------------------------------

DECOY_KINDS = {
    "same_lot_other_product": dict(
        acceptable=[None], notice="forbidden",
        why="the recalled lot on another product (another labeler's NDC, another drug): a lot never matches alone"),
    "same_lot_no_ndc_other_name": dict(
        acceptable=[None], notice="forbidden",
        why="the recalled lot typed under another drug's name, no NDC: nothing but the lot agrees"),
    "same_product_other_lot": dict(
        acceptable=[None], notice="forbidden",
        why="the recalled NDC and name with a lot the recall does not name (far from all of its lots)"),
    "decorated_other_lot": dict(
        acceptable=[None], notice="forbidden",
        why="as same_product_other_lot, the other lot typed with its expiry or a prefix: tidying the field must "
            "not turn it into a recalled lot"),
    "lot_one_char_off": dict(
        acceptable=[None, "candidate"], notice="only_if_candidate",
        why="the recalled NDC with a lot one character away that is no read-alike (not O/0, I/1, a leading zero or "
            "a dropped suffix) and no other recalled lot: another lot; a pharmacist may look at it as a candidate"),
    "other_drug": dict(
        acceptable=[None], notice="forbidden", why="another drug, NDC and lot altogether"),
    "outside_window": dict(
        acceptable=[None], notice="forbidden",
        why="an all-lots recall limited to an expiry window (or a distribution window): the pack's expiry (or the "
            "dispensing, before the distribution started) is known and outside it"),
    "all_lots_other_labeler": dict(
        acceptable=[None, "candidate"], notice="only_if_candidate",
        why="an all-lots recall naming its NDC products; the dispensing is the same ingredient under another "
            "labeler's NDC: not the recalled product, though a pharmacist may look at it as a candidate"),
}

HOLDER_KINDS = {
    "plain_exact": "the recalled NDC and lot as printed (control)",
    "lot_expiry": "the lot field carries the lot and its expiry, in many shapes",
    "lot_prefix": "the lot field carries a prefix (LOT, LOT#, L:, LT, #, BATCH, (10), ...)",
    "lot_gs1": "the lot field (or the scan) carries a GS1 element string, raw scanner output or a Digital Link",
    "lot_punct": "the lot with stray punctuation, quotes, dots, asterisks, doubled spaces, lower case",
    "near_miss": "a near-miss lot of the recalled product (leading zeros, O/0, I/1, suffix left off)",
    "unknown_product_brand": "a product nobody's vocabulary knows, typed by its brand, no NDC, the exact lot; the "
                             "recall's subject reduced to one ingredient or left unresolved",
    "lot_level_no_ndc": "a lot-level recall naming no NDC; the drug typed by name, no NDC, the exact lot",
    "repackaged_abbrev": "a repackager's NDC (another labeler than the recall names) typed with a pharmacy "
                         "abbreviation and the exact recalled lot",
    "window_inside": "an all-lots recall limited to an expiry (or distribution) window; the pack inside it",
    "all_lots_class1_ndc": "an all-lots Class I recall naming its NDC products; any lot of the product",
    "all_lots_brand_no_ndc": "an all-lots Class I recall of a product nobody's vocabulary knows; its brand, no NDC",
}
IDEAL = {"plain_exact": "confirmed", "lot_expiry": "confirmed", "lot_prefix": "confirmed", "lot_gs1": "confirmed",
         "lot_punct": "confirmed", "near_miss": "probable", "unknown_product_brand": "probable",
         "lot_level_no_ndc": "probable", "repackaged_abbrev": "probable", "window_inside": "product_all_lots",
         "all_lots_class1_ndc": "product_all_lots", "all_lots_brand_no_ndc": "candidate"}

# Rows per class (holders, then decoys). Every class goes through every path.
HOLDER_ROWS = {"plain_exact": 15, "lot_expiry": 45, "lot_prefix": 25, "lot_gs1": 25, "lot_punct": 20,
               "near_miss": 20, "unknown_product_brand": 30, "lot_level_no_ndc": 15, "repackaged_abbrev": 25,
               "window_inside": 20, "all_lots_class1_ndc": 15, "all_lots_brand_no_ndc": 10}
DECOY_ROWS = {"same_lot_other_product": 20, "same_lot_no_ndc_other_name": 15, "same_product_other_lot": 20,
              "decorated_other_lot": 10, "lot_one_char_off": 10, "other_drug": 10, "outside_window": 20,
              "all_lots_other_labeler": 10}

# --- the grammar of typed shapes ----------------------------------------------------------------------

MONTHS = [m.upper() for m in calendar.month_abbr[1:]]


def _expiry_forms(day: date) -> dict[str, str]:
    y, m, d, mon = day.year, day.month, day.day, MONTHS[day.month - 1]
    return {
        "MM/YY": f"{m:02d}/{y % 100:02d}", "MM/YYYY": f"{m:02d}/{y}", "YYYY-MM": f"{y}-{m:02d}",
        "MON YYYY": f"{mon} {y}", "MON-YY": f"{mon}-{y % 100:02d}", "YYMON": f"{y % 100:02d}{mon}",
        "MMYYYY": f"{m:02d}{y}", "M/YY": f"{m}/{y % 100:02d}", "YYYY-MM-DD": day.isoformat(),
        "MM/DD/YYYY": f"{m:02d}/{d:02d}/{y}", "DDMONYYYY": f"{d:02d}{mon}{y}", "Mon YYYY": f"{mon.title()} {y}",
        "MM-YYYY": f"{m:02d}-{y}", "MM.YYYY": f"{m:02d}.{y}", "YYYY/MM": f"{y}/{m:02d}", "MONYY": f"{mon}{y % 100:02d}",
    }


EXPIRY_FORMS = list(_expiry_forms(date(2026, 5, 31)))
# How a lot and its expiry share one field ({L} lot, {E} expiry).
EXPIRY_JOINS = ["{L} EXP {E}", "{L} EXP: {E}", "{L} (EXP {E})", "{L} ({E})", "{L}, {E}", "{L}, EXP {E}",
                "{L} - {E}", "{L}/{E}", "{L} {E}", "{E} {L}", "EXP {E} LOT {L}", "{L} exp {E}", "{L}  EXP {E}",
                "{L} [{E}]", "{L} EXP.{E}", "{L}; EXP {E}", "{L} Exp Date {E}", "{E} - {L}", "{L}-{E}",
                "LOT {L} EXP {E}", "{L} E:{E}", "{L} ED {E}"]
PREFIXES = ["LOT {L}", "LOT# {L}", "LOT #{L}", "L:{L}", "L: {L}", "LT {L}", "#{L}", "BATCH {L}", "(10){L}",
            "Lot No. {L}", "LOT: {L}", "Lot {L}", "lot#{L}", "BATCH NO {L}", "LOT NO: {L}", "Lot Number: {L}",
            "LT# {L}", "B/N {L}", "LOT-{L}"]
GS1_FORMS = ["(01){G}(17){X}(10){L}", "(01){G}(10){L}(17){X}", "01{G}17{X}10{L}\x1d21{S}", "01{G}17{X}10{L}|21{S}",
             "]d201{G}17{X}10{L}", "https://id.gs1.org/01/{G}/10/{L}?17={X}", "(10){L}(17){X}",
             "]d201{G}21{S}<GS>10{L}<GS>17{X}", "01{G}10{L}^17{X}", "(01) {G} (17) {X} (10) {L}",
             "01{G}17{X}10{L}~21{S}", "]d2(01){G}(17){X}(10){L}(21){S}"]
GS1_NO_GTIN = ["(17){X}(10){L}", "(10){L}(17){X}", "17{X}10{L}", "]d217{X}10{L}"]
PUNCT = ['"{L}"', "'{L}'", "{L}.", "*{L}*", "{L}*", "  {L}  ", "{l}", "{L};", "{L},", "({L})", "{L}-", "`{L}`",
         "{L} .", "{l}.", '"{l}"', "**{L}", "{L}:"]
# Held out: used in the corpus, never named in a report beyond their family.
HELD_OUT = {
    "expiry_join": {"{L} E:{E}", "{L} ED {E}", "{E} - {L}", "{L} EXP.{E}"},
    "expiry_form": {"MM.YYYY", "YYYY/MM", "MONYY"},
    "prefix": {"LT# {L}", "B/N {L}", "LOT-{L}"},
    "gs1": {"01{G}17{X}10{L}~21{S}", "]d2(01){G}(17){X}(10){L}(21){S}"},
    "punct": {"{L} .", '"{l}"', "**{L}", "{L}:"},
    "name": {"abbrev_title_case"},
}
# Pharmacy-system abbreviations of real generics ({s}: the strength as printed, digits only).
ABBREVIATIONS = {
    "losartan": ["LOSART POT {s}MG", "LOSARTAN K {s}MG TAB", "LOSART {s}"],
    "valsartan": ["VALSART {s}MG TAB", "VALSARTAN {s}MG TB", "VALSART {s}"],
    "irbesartan": ["IRBESART {s}MG", "IRBESARTAN {s}MG TB"],
    "hydrochlorothiazide+losartan": ["LOSART/HCTZ {s}", "LOSARTAN-HCTZ {s} TAB", "LOSART POT/HCTZ {s}MG"],
    "hydrochlorothiazide+valsartan": ["VALSART/HCTZ {s}", "VALSARTAN-HCTZ {s}MG", "VALS/HCTZ {s}"],
    "hydrochlorothiazide": ["HCTZ {s}MG", "HCTZ {s} TAB"],
    "metformin": ["METFORMIN ER {s}MG", "MTF ER {s}MG", "METFORM HCL ER {s}"],
    "ranitidine": ["RANITID HCL {s}MG", "RANITIDINE {s}MG TB", "RANITID {s}"],
    "acetaminophen": ["APAP {s}MG", "APAP ES {s}MG TAB"],
    "acetaminophen+hydrocodone": ["HYDROCOD/APAP {s}", "HC/APAP {s}", "HYDROCODONE-APAP {s}"],
    "acetaminophen+oxycodone": ["OXYCOD/APAP {s}", "OXYCODONE-APAP {s}"],
    "atorvastatin": ["ATORVAST CALC {s}MG", "ATORVASTATIN CA {s}MG", "ATORVAST {s}"],
    "amlodipine": ["AMLOD BESYL {s}MG", "AMLODIPINE BES {s}MG"],
    "metoprolol": ["METOPROL SUCC ER {s}MG", "METOPROL TART {s}MG"],
    "levothyroxine": ["LEVOTHYROX NA {s}MCG", "LEVOTHYROXINE {s}MCG TB", "LEVOTHYROX {s}"],
    "lisinopril": ["LISINOP {s}MG", "LISINOPRIL {s}MG TB"],
    "ibuprofen": ["IBU {s}MG", "IBUPROF {s}MG TAB"],
    "bupropion": ["BUPROP XL {s}MG", "BUPROPION HCL SR {s}"],
    "alprazolam": ["ALPRAZOL {s}MG", "ALPRAZOLAM {s}MG TB"],
    "simvastatin": ["SIMVAST {s}MG", "SIMVASTATIN {s}MG TB"],
    "methylprednisolone": ["METHYLPRED {s}MG DOSEPAK", "METHYLPREDNISOL {s}MG"],
    "pantoprazole": ["PANTOPRAZ SOD DR {s}MG", "PANTOPRAZOLE DR {s}"],
    "venlafaxine": ["VENLAFAX ER {s}MG", "VENLAFAXINE XR {s}"],
    "duloxetine": ["DULOXET DR {s}MG", "DULOXETINE DR {s}"],
    "clonidine": ["CLONID HCL {s}MG", "CLONIDINE {s}MG TB"],
    "estradiol": ["ESTRAD {s}MG", "ESTRADIOL {s}MG TB"],
    "ciprofloxacin": ["CIPROFLOX {s}MG", "CIPRO {s}MG TB"],
    "hydroxyzine": ["HYDROXYZ HCL {s}MG", "HYDROXYZINE PAM {s}MG"],
    "doxycycline": ["DOXYCYC HYC {s}MG", "DOXY {s}MG"],
    "famotidine": ["FAMOTID {s}MG", "FAMOTIDINE {s}MG TB"],
    "quetiapine": ["QUETIAP {s}MG", "QUETIAPINE FUM {s}MG"],
    "lamotrigine": ["LAMOTRIG {s}MG", "LAMOTRIGINE {s}MG TB"],
    "prednisone": ["PREDNIS {s}MG", "PREDNISONE {s}MG TB"],
    "glipizide": ["GLIPIZ {s}MG", "GLIPIZIDE ER {s}MG"],
    "omeprazole": ["OMEPRAZ DR {s}MG", "OMEPRAZOLE {s}MG CP"],
}
REPACKAGER = re.compile(
    r"repack|bryant ranch|a-s medication|nucare|proficient rx|pd-rx|preferred pharmaceuticals|direct ?rx|"
    r"quality care|northwind|aphena|american health packaging|avkare|golden state|denton|lake erie|"
    r"unit dose services|safecor|medvantx|asclemed|blenheim|rebel distributors|st\. mary|major pharmaceuticals|"
    r"h\.? ?j\.? harkins|legacy pharmaceutical packaging|precision dose|carilion|readymeds|aidarex|"
    r"physicians total care|stat rx|clinical solutions wholesale|altura|liberty pharmaceuticals|"
    r"dispensing solutions|med-health pharma|coupler", re.I)
UNKNOWN_WORDS = re.compile(r"supplement|sanitizer|homeopathic|\bhpus\b|herbal|kratom|enhancement|remedy", re.I)
_PRINTED_NDC = re.compile(r"(?<![\d-])(\d{4,5}-\d{3,4}-\d{1,2})(?![\d-])")
_STRENGTH = re.compile(r"(\d+(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?)\s*(mg|mcg|g|ml|%|units?|iu)\b", re.I)
# GS1 AI 10 accepts character set 82, which has no '@', space or '#'.
_GS1_LOT = re.compile(r"^[A-Za-z0-9\-./]{1,20}$")


# --- reading the real records ------------------------------------------------------------------------

def _read(name: str) -> list[dict]:
    path = OPENFDA / name
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            return json.loads(archive.read(archive.namelist()[0]))["results"]
    return json.loads(path.read_text())["results"]


def _tight(text: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", (text or "").upper())


def _look_alike(text: str) -> str:
    """My own fold of a lot for "is this too close": letters read as digits, leading zeros off."""
    return _tight(text).translate(str.maketrans("OILSZB", "011528")).lstrip("0")


def _distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _as_written(lot: str, text: str) -> str:
    """The lot as the record's own text writes it (its punctuation kept: "BTH:230551", "12132019@4"), or the
    printed lot when the text writes it only with spaces or line breaks inside."""
    pattern = r"[^A-Za-z0-9\s]?".join(re.escape(c) for c in lot)
    found = re.search(rf"(?<![A-Za-z0-9]){pattern}(?![A-Za-z0-9])", text, re.I)
    return found.group(0) if found else lot


def _day(text: str | None, *, end: bool) -> date | None:
    """An ISO date as written (YYYY, YYYY-MM, YYYY-MM-DD), read as its first or last day."""
    if not text:
        return None
    parts = [int(p) for p in text.split("-")]
    if len(parts) == 3:
        return date(*parts)
    if len(parts) == 2:
        return date(parts[0], parts[1], calendar.monthrange(*parts)[1] if end else 1)
    return date(parts[0], 12, 31) if end else date(parts[0], 1, 1)


@dataclass
class Recall:
    number: str
    source: str
    raw: dict
    kind: str                 # lots | all_lots | all_lots_window
    lots: list                # [(printed lot, expiry ISO or None)], only those written in the record's code_info
    subject: str
    identity_source: str
    products: set             # NDC products the record's facts carry
    named: set                # of those, the ones the record's own text names
    printed: dict             # NDC product -> package NDCs as printed (4-4-2, 5-3-2 or 5-4-1)
    expiry_window: list | None
    dispensed_window: list | None
    initiated: date
    strength: str             # digits as printed ("50", "10/325"), for abbreviations
    strength_text: str        # with its unit as printed ("50 mg", "500G")
    label_names: list = field(default_factory=list)
    as_written: dict = field(default_factory=dict)  # printed lot -> the lot as code_info writes it ("BTH:230551")

    @property
    def status(self) -> str:
        return self.raw["status"]

    @property
    def classification(self) -> str:
        return self.raw["classification"]

    @property
    def open(self) -> bool:
        return self.status not in CLOSED

    @property
    def head(self) -> str:
        """What a pharmacy would type from the product description: its first part (up to a comma, bracket or
        'USP'), or for a resolved drug the first part naming one of its ingredients (descriptions may open
        with the firm's name)."""
        parts = [" ".join(p.split())[:80] for p in re.split(r"(?<!\d),|,(?!\d{3})|[()\[\];]| - |\bUSP\b",
                                                               self.raw["product_description"]) if p.strip()]
        naming = [p for p in parts[:4] if self._ingredient_words & set(re.findall(r"[a-z]{4,}", p.lower()))]
        return (naming or parts or [""])[0]

    @property
    def short(self) -> str:
        """Two words of the head, from the first that names an ingredient (else its first two)."""
        words = self.head.split()
        start = next((i for i, w in enumerate(words) if set(re.findall(r"[a-z]{4,}", w.lower()))
                      & self._ingredient_words), 0)
        return _capitalised(" ".join(words[start:start + 2]))

    @property
    def _ingredient_words(self) -> set[str]:
        if not self.subject or self.subject.startswith("product:"):
            return set()
        return set(re.findall(r"[a-z]{4,}", self.subject))

    def pack_ndcs(self) -> list[str]:
        """Package NDCs of the recalled product: those its own text names, else those its facts carry
        (openFDA's block lists every strength of a listing, also those not recalled)."""
        return self.printed_ndcs() or self.printed_ndcs(self.products)

    def printed_ndcs(self, products=None) -> list[str]:
        return sorted(n for p in (products if products is not None else self.named) for n in self.printed.get(p, []))


def read_recalls() -> list[Recall]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")
    os.environ.setdefault("UNSAY_PROFILE", "test")
    import django

    django.setup()
    from drugs.ndc import ndc_product, ndc_products, ndcs_in_text, normalize_ndc
    from recalls.ingest import parse_enforcement
    from recalls.record_fields import Malformed

    versions = defaultdict(list)  # recall number -> [(snapshot, record)], newest snapshot first
    for source, name in SOURCES.items():
        for raw in _read(name):
            held = versions[raw.get("recall_number")]
            if not any(s == source for s, _ in held):  # a snapshot's first record of a number (tests.factories)
                held.append((source, raw))
    recalls = []
    for number, held in versions.items():
        # A recall reaches a pharmacy while it is open: its newest open version, else its newest.
        source, raw = next(((s, r) for s, r in held if r.get("status") not in CLOSED), held[0])
        try:
            parsed = parse_enforcement(raw)
        except Malformed:
            continue
        scope = parsed.attributes["lot_scope"]
        code = _tight(" ".join(raw.get(n) or "" for n in ("code_info", "more_code_info")))
        lots = [(entry["lot"], entry["expiry"]) for entry in scope["lots"]
                if _tight(entry["lot"]) and _tight(entry["lot"]) in code and entry["lot"] not in scope["uncertain"]]
        texts = " ".join(raw.get(n) or "" for n in ("product_description", "code_info", "more_code_info"))
        products = ndc_products(parsed.ndcs)
        named = ndc_products(ndcs_in_text(texts)) & products
        printed = defaultdict(set)
        for text in [*_PRINTED_NDC.findall(texts), *((raw.get("openfda") or {}).get("package_ndc") or [])]:
            text = re.sub(r"\s", "", text)
            try:
                product = ndc_product(normalize_ndc(text))
            except ValueError:
                continue
            if product in products and len(text.replace("-", "")) == 10:
                printed[product].add(text)
        strength = _STRENGTH.search(raw["product_description"])
        openfda = raw.get("openfda") or {}
        written = " ".join(raw.get(n) or "" for n in ("code_info", "more_code_info"))
        recalls.append(Recall(
            number=number, source=source, raw=raw, kind=scope["kind"], lots=lots, subject=parsed.subject,
            identity_source=parsed.identity.get("identity_source", ""), products=products, named=named,
            printed={k: sorted(v) for k, v in printed.items()}, expiry_window=scope.get("expiry_window"),
            dispensed_window=scope.get("dispensed_window"),
            initiated=datetime.strptime(raw["recall_initiation_date"], "%Y%m%d").date(),
            strength=strength.group(1).replace(" ", "") if strength else "",
            strength_text=" ".join(strength.group(0).split()) if strength else "",
            label_names=[*(openfda.get("brand_name") or [])[:1], *(openfda.get("generic_name") or [])[:1]],
            as_written={lot: _as_written(lot, written) for lot, _ in lots}))
    return recalls


# --- choosing recalls by class ----------------------------------------------------------------------

def _stable(seed: int, text: str) -> str:
    return hashlib.sha256(f"{seed}:{text}".encode()).hexdigest()


def _good_lot(lot: str, *, minimum: int = 4) -> bool:
    tight = _tight(lot)
    return minimum <= len(tight) <= 20 and any(c.isdigit() for c in tight) and len(set(tight)) > 2


def _resolved(recall: Recall) -> bool:
    return bool(recall.subject) and not recall.subject.startswith("product:")


def _order(recalls, seed):
    """Open recalls first (a closed one drafts no letter by itself), newest snapshots first (the least tested
    records), then a seeded shuffle."""
    rank = {name: i for i, name in enumerate(SOURCES)}
    return sorted(recalls, key=lambda r: (not r.open, rank[r.source], _stable(seed, r.number)))


def _spread(recalls, seed, count, *, per_source=None, closed=0, per_subject=1):
    """`count` recalls, at most `per_subject` per subject, of which `closed` (when there are) already closed on
    arrival (their holders must still never be told "safe"; they get no letter by design); newest snapshots
    first but never only one (per_source: at most this many from one snapshot while others have candidates)."""
    chosen, subjects, by_source = [], Counter(), defaultdict(int)
    ordered = _order(recalls, seed)
    wanted = [(False, count - closed), (True, count)]  # open ones, then the closed quota (and any shortfall)
    for closed_turn, upto in wanted:
        for relax in (False, True):
            for recall in ordered:
                if len(chosen) >= upto:
                    break
                key = recall.subject or recall.head.lower()
                wrong_status = (not recall.open) != closed_turn and not (closed_turn and relax)
                if recall in chosen or subjects[key] >= per_subject or wrong_status:
                    continue
                if not relax and per_source and by_source[recall.source] >= per_source:
                    continue
                chosen.append(recall)
                subjects[key] += 1
                by_source[recall.source] += 1
    return chosen


@dataclass
class Choice:
    by_class: dict
    pools: dict


def choose(recalls: list[Recall], seed: int) -> Choice:
    lot_level = [r for r in recalls if r.kind == "lots" and r.lots and len(r.lots) <= 40]
    lot_counts = defaultdict(int)
    for recall in recalls:
        for lot, _ in recall.lots:
            lot_counts[_tight(lot)] += 1
    # A lot another record also names (another firm's or a re-recall) would make a decoy a holder.
    own_lots = {r.number: [(lot, exp) for lot, exp in r.lots if lot_counts[_tight(lot)] == 1] for r in recalls}

    def with_lots(recall, minimum=4):
        return [(lot, exp) for lot, exp in own_lots[recall.number] if _good_lot(lot, minimum=minimum)]

    named_ndc = [r for r in lot_level if r.named and r.printed_ndcs() and _resolved(r) and with_lots(r)]
    by_class = {}
    by_class["named"] = _spread(named_ndc, seed, 16, per_source=7, closed=3)
    taken = {r.number for r in by_class["named"]}
    repack_sources = defaultdict(list)  # subject -> (printed NDC, strength, record) of repackagers' packs
    for recall in recalls:
        if REPACKAGER.search(recall.raw.get("recalling_firm") or "") and recall.subject in ABBREVIATIONS:
            for ndc in recall.pack_ndcs():
                repack_sources[recall.subject].append((ndc, recall.strength, recall.number))
    makers = [r for r in named_ndc if r.number not in taken and r.subject in ABBREVIATIONS and r.strength
              and not REPACKAGER.search(r.raw.get("recalling_firm") or "")
              and any(ndc.split("-")[0].zfill(5) not in {p[:5] for p in r.products}
                      for ndc, _, _ in repack_sources[r.subject])]
    by_class["repackaged"] = _spread(makers, seed, 8, per_source=4)
    taken |= {r.number for r in by_class["repackaged"]}
    # The recall's subject left unresolved or reduced to one ingredient, and a brand no vocabulary knows.
    unknown = [r for r in lot_level if r.number not in taken and with_lots(r, 3)
               and UNKNOWN_WORDS.search(r.raw["product_description"])
               and (r.subject.startswith("product:") or (r.subject and "+" not in r.subject))
               and not _resolved_head(r)]
    by_class["unknown"] = _spread(unknown, seed, 12, per_source=6, closed=2)
    taken |= {r.number for r in by_class["unknown"]}
    no_ndc = [r for r in lot_level if r.number not in taken and not r.products and _resolved(r) and with_lots(r)
              and not UNKNOWN_WORDS.search(r.raw["product_description"]) and _resolved_head(r)]
    by_class["no_ndc"] = _spread(no_ndc, seed, 6, per_source=3)
    all_lots = [r for r in recalls if r.kind == "all_lots" and r.classification == "Class I"]
    by_class["all_lots_ndc"] = _spread([r for r in all_lots if r.printed_ndcs(r.products)], seed, 5, closed=1,
                                       per_subject=4)
    # The text itself must say every lot ("All lots"): "all product labelled with DOM ..." names some only.
    by_class["all_lots_brand"] = _spread(
        [r for r in all_lots if not r.products and r.subject.startswith("product:")
         and re.search(r"\ball lots\b", r.raw.get("code_info") or "", re.I)], seed, 5, per_source=3)
    windows = [r for r in recalls if r.kind == "all_lots_window" and r.printed_ndcs(r.products)
               and ((r.expiry_window and r.expiry_window[0]) or (r.dispensed_window and r.dispensed_window[0]))]
    # Distribution windows are all closed in these snapshots: two of them, for their outside-the-window decoys.
    by_class["window"] = (
        _spread([r for r in windows if r.expiry_window and r.expiry_window[0]], seed, 6, per_source=3, closed=1)
        + _spread([r for r in windows if r.dispensed_window and not r.expiry_window], seed, 2, closed=2))
    chosen = {r.number for v in by_class.values() for r in v}
    chosen_subjects = {r.subject for v in by_class.values() for r in v}
    chosen_products = set().union(*(r.products for v in by_class.values() for r in v))
    # Other real products for decoys: never a chosen recall's subject or product.
    others = [r for r in named_ndc if r.number not in chosen and r.subject not in chosen_subjects
              and not (r.products & chosen_products) and not UNKNOWN_WORDS.search(r.raw["product_description"])]
    lots_pool = [lot for r in lot_level if r.number not in chosen for lot, _ in with_lots(r, 5)
                 if re.fullmatch(r"[A-Z0-9][A-Z0-9-]{3,15}", lot)]
    pools = {"others": _order(others, seed)[:60],
             "lots": sorted(set(lots_pool), key=lambda lot: _stable(seed, lot))[:400],
             "repack": repack_sources,
             "own_lots": {r.number: with_lots(r, 1) for r in recalls if r.number in chosen},
             "all": {r.number: r for r in recalls}}
    return Choice(by_class=by_class, pools=pools)


def _resolved_head(recall: Recall) -> bool:
    from drugs.identity import resolve

    return bool(resolve(recall.head).key)


# --- building rows -------------------------------------------------------------------------------------

def _last_day(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _month_end(day: date) -> date:
    return _last_day(day.year, day.month)


class Builder:
    def __init__(self, choice: Choice, seed: int):
        self.choice, self.rng, self.seed = choice, random.Random(seed), seed
        self.rows: list[dict] = []
        self.recalls: dict[str, Recall] = {}
        self.paths = {}

    # -- shared pieces --
    def path_for(self, klass: str) -> str:
        cycle = self.paths.setdefault(klass, [])
        if not cycle:
            cycle.extend(self.rng.sample(PATHS, len(PATHS)))
        return cycle.pop()

    def dispensed(self, recall: Recall, *, before: date | None = None, not_before: date | None = None) -> datetime:
        latest = recall.initiated - timedelta(days=7)
        if before:
            latest = min(latest, before - timedelta(days=20))
        earliest = max(latest - timedelta(days=300), not_before or date(1990, 1, 1))
        if earliest > latest:
            earliest = latest
        day = earliest + timedelta(days=self.rng.randint(0, (latest - earliest).days))
        return datetime(day.year, day.month, day.day, self.rng.randint(9, 18), self.rng.choice((0, 15, 30, 45)),
                        tzinfo=UTC)

    def pack_expiry(self, dispensed: datetime, lot_expiry: str | None) -> date:
        if lot_expiry:
            return _day(lot_expiry, end=True)
        later = dispensed.date() + timedelta(days=self.rng.randint(200, 720))
        return _month_end(later)

    def name(self, recall: Recall, *, shapes=("head", "label", "upper", "short")) -> tuple[str, str]:
        options = {}
        head = recall.head
        options["head"] = head
        glued = recall.strength_text.replace(" ", "").upper()
        options["upper"] = " ".join(head.upper().split()[:4]) + (f" {glued}" if glued and glued not in
                                                                 head.upper().replace(" ", "") else "")
        options["short"] = recall.short
        if recall.label_names:
            options["label"] = f"{_capitalised(recall.label_names[0])} {recall.strength_text}".strip()
        shape = self.rng.choice([s for s in shapes if s in options])
        return options[shape], shape

    def question(self, typed: str) -> str:
        words = [w.strip("-'") for w in re.findall(r"[A-Za-z][A-Za-z'\-]+", typed)]
        words = [w for w in words if len(w) > 2][:2]
        if not words or self.rng.random() < 0.3:
            return "Is my medicine safe?"
        return f"Is my {_capitalised(' '.join(words))} safe?"

    def exact_lot(self, recall: Recall, lot: str) -> tuple[str, str]:
        """The recalled lot typed exactly: as the recall's text writes it, or as printed on its facts."""
        written = recall.as_written.get(lot, lot)
        if written != lot and self.rng.random() < 0.5:
            return written, "as written"
        return lot, "plain"

    def ndc_text(self, printed: str) -> tuple[str, str]:
        from drugs.ndc import normalize_ndc

        shape = self.rng.choice(["printed", "printed", "11", "542"])
        if shape == "11":
            return normalize_ndc(printed).replace("-", ""), shape
        if shape == "542":
            return normalize_ndc(printed), shape
        return printed, shape

    def add(self, *, recall: Recall, klass: str, label: str, entry: dict, shape: str, held_out: bool,
            decoy_kind: str = "", note: str = "", path: str | None = None, defect: dict | None = None):
        self.recalls[recall.number] = recall
        path = path or self.path_for(klass)
        entry = dict(entry)
        entry.setdefault("quantity", self.rng.choice((30, 30, 60, 90, 1, 14)))
        entry.setdefault("site", self.rng.choice(("Main St", "", "Drive-through", "Clinic pharmacy")))
        for name in ("drug", "product_description", "ndc", "lot", "scan", "serial"):
            entry.setdefault(name, "")
        entry.setdefault("expiry", None)
        number = len(self.rows) + 1
        if label == "holder":
            acceptable, notice = list(HOLDER_CLASSES), ("required" if recall.open else "closed_on_arrival")
        elif label == "decoy":
            acceptable, notice = DECOY_KINDS[decoy_kind]["acceptable"], DECOY_KINDS[decoy_kind]["notice"]
        else:  # malformed: what its corrected entry must meet, set by the caller
            acceptable, notice = [], ""
        row = {
            "id": f"LT-{number:04d}", "patient_ref": f"SYN-LT-{number:04d}", "recall": recall.number,
            "label": label, "class": klass, "decoy_kind": decoy_kind or None, "path": path,
            "shape": shape, "held_out": held_out, "ideal": IDEAL.get(klass) if label == "holder" else None,
            "acceptable": acceptable, "notice": notice, "entry": entry, "question": self.question(
                entry.get("drug") or entry.get("product_description") or ""), "note": note,
        }
        if defect:
            row["defect"] = defect
        self.rows.append(row)
        return row

    # -- shapes --
    def _pick(self, family: str, options: list[str]) -> tuple[str, bool, int]:
        index = self.rng.randrange(len(options))
        form = options[index]
        return form, form in HELD_OUT.get(family, set()), index

    def _shape_id(self, family: str, form: str, held: bool) -> str:
        if held:
            return f"{family}/held-out-{sorted(HELD_OUT[family]).index(form) + 1}"
        return f"{family}:{form}"

    def expiry_shape(self, lot: str, expiry: date, *, four_digit_year=False) -> tuple[str, str, bool]:
        """The lot and its expiry in one field. `four_digit_year`: only forms whose reading cannot be
        disputed ("05/26" may be read as the 26th of May), for rows whose label hangs on the expiry."""
        join, held_join, _ = self._pick("expiry_join", EXPIRY_JOINS)
        forms = [f for f in EXPIRY_FORMS if "YYYY" in f] if four_digit_year else EXPIRY_FORMS
        form, held_form, _ = self._pick("expiry_form", forms)
        text = join.replace("{L}", lot).replace("{E}", _expiry_forms(expiry)[form])
        held = held_join or held_form
        shape = " + ".join([self._shape_id("expiry_join", join, held_join), self._shape_id("expiry_form", form,
                                                                                            held_form)])
        return text, shape, held

    def prefix_shape(self, lot: str) -> tuple[str, str, bool]:
        form, held, _ = self._pick("prefix", PREFIXES)
        return form.replace("{L}", lot), self._shape_id("prefix", form, held), held

    def punct_shape(self, lot: str) -> tuple[str, str, bool]:
        form, held, _ = self._pick("punct", PUNCT)
        return form.replace("{L}", lot).replace("{l}", lot.lower()), self._shape_id("punct", form, held), held

    def gs1_shape(self, lot: str, expiry: date, printed_ndc: str | None) -> tuple[str, str, bool]:
        from drugs.gs1 import gtin_for_ndc

        options = GS1_FORMS if printed_ndc else GS1_NO_GTIN
        if "21" in lot or "17" in lot:  # with no separator, such a lot may hide a serial or expiry: GS1 refuses it
            options = [f for f in options if not _unseparated(f)]
        form, held, _ = self._pick("gs1", options)
        serial = "".join(self.rng.choice("0123456789ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(12))
        text = (form.replace("{G}", gtin_for_ndc(printed_ndc) if printed_ndc else "")
                .replace("{X}", expiry.strftime("%y%m%d")).replace("{L}", lot).replace("{S}", serial))
        return text, self._shape_id("gs1", form, held), held

    def scan_for(self, printed_ndc: str | None, lot: str, expiry: date) -> str:
        """The pack's own barcode for the scan path (its shape varies as scanners do)."""
        from drugs.gs1 import gtin_for_ndc

        x, serial = expiry.strftime("%y%m%d"), "".join(self.rng.choice("0123456789") for _ in range(10))
        if not printed_ndc:
            return self.rng.choice(["(17){X}(10){L}", "(10){L}(17){X}"]).replace("{X}", x).replace("{L}", lot)
        form = self.rng.choice(["(01){G}(17){X}(10){L}(21){S}", "01{G}17{X}10{L}\x1d21{S}",
                                "]d201{G}17{X}10{L}|21{S}", "01{G}21{S}<GS>17{X}10{L}"])
        return form.replace("{G}", gtin_for_ndc(printed_ndc)).replace("{X}", x).replace("{L}", lot).replace(
            "{S}", serial)


def _naming_words(text: str) -> set[str]:
    """Words of four letters or more, less packaging and form words: two texts sharing none name different things."""
    common = {"tablets", "tablet", "capsules", "injection", "solution", "oral", "bottle", "bottles", "count",
              "packaged", "supplement", "dietary", "sodium", "hydrochloride", "with", "each", "contains", "units",
              "single", "dose", "vial", "vials", "film", "coated", "extended", "release", "delayed", "topical"}
    return {w for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in common}


def _unseparated(form: str) -> bool:
    """A raw GS1 form with no separator at all (its last field, a lot, runs to the end)."""
    return not form.startswith(("(", "]d2(", "http")) and not any(
        sep in form for sep in ("\x1d", "|", "^", "~", "<GS>"))


def _capitalised(text: str) -> str:
    return " ".join(w[:1].upper() + w[1:].lower() for w in text.split())


NEAR_MISS_RULES = ("zero typed as O", "O typed as zero", "one typed as I", "I typed as one", "suffix left off",
                   "leading zero added", "leading zeros dropped")


def _near_misses(lot: str) -> dict[str, str]:
    """The near misses of a printed lot by the four rules (leading zeros, O/0, I/1, suffix left off)."""
    options = []
    options.append(("leading zero added", "0" + lot))
    if lot[0] == "0" and len(lot.lstrip("0")) >= 4:
        options.append(("leading zeros dropped", lot.lstrip("0")))
    if "0" in lot and any(c.isalpha() for c in lot):
        i = lot.index("0")
        options.append(("zero typed as O", lot[:i] + "O" + lot[i + 1:]))
    if "O" in lot.upper():
        i = lot.upper().index("O")
        options.append(("O typed as zero", lot[:i] + "0" + lot[i + 1:]))
    if "1" in lot and any(c.isalpha() for c in lot):
        i = lot.index("1")
        options.append(("one typed as I", lot[:i] + "I" + lot[i + 1:]))
    if "I" in lot.upper():
        i = lot.upper().index("I")
        options.append(("I typed as one", lot[:i] + "1" + lot[i + 1:]))
    suffix = re.match(r"^(.*[A-Za-z0-9])[-\s./]([A-Za-z0-9]{1,2})$", lot)
    if suffix and len(_tight(suffix.group(1))) >= 4:
        options.append(("suffix left off", suffix.group(1)))
    return dict(options)


def _one_char_off(lot: str, taken: set, rng: random.Random) -> str | None:
    """Another lot one character away from `lot` that is no read-alike and no lot in `taken`."""
    positions = [i for i, c in enumerate(lot) if c.isdigit() and c not in "01"]
    rng.shuffle(positions)
    for i in positions:
        for digit in rng.sample("2345678", 7):
            if digit == lot[i]:
                continue
            candidate = lot[:i] + digit + lot[i + 1:]
            if all(_look_alike(candidate) != _look_alike(t) and _tight(candidate) != _tight(t) for t in taken):
                return candidate
    return None


def _far_lot(pool: list[str], avoid: list[str], rng: random.Random) -> str:
    for _ in range(500):
        lot = rng.choice(pool)
        if all(_distance(_look_alike(lot), _look_alike(a)) >= 3 and _look_alike(a) not in _look_alike(lot)
               and _look_alike(lot) not in _look_alike(a) for a in avoid):
            return lot
    raise RuntimeError("no far lot in the pool")


# --- the rows of each class ---------------------------------------------------------------------------

LOT_CLASSES = ("plain_exact", "lot_expiry", "lot_prefix", "lot_gs1", "lot_punct", "near_miss")


def _lot_level_holder(b: Builder, klass: str, recall: Recall, lot: str, lot_expiry: str | None, near=None):
    printed = b.rng.choice(recall.printed_ndcs())
    dispensed = b.dispensed(recall, before=_day(lot_expiry, end=True) if lot_expiry else None)
    expiry = b.pack_expiry(dispensed, lot_expiry)
    drug, name_shape = b.name(recall)
    path = b.path_for(klass)
    ndc, ndc_shape = b.ndc_text(printed)
    entry = {"drug": drug, "ndc": ndc, "dispensed_at": dispensed.isoformat()}
    held, note = False, ""
    if klass == "plain_exact":
        typed, shape = b.exact_lot(recall, lot)
        if b.rng.random() < 0.5:
            entry["expiry"] = expiry.isoformat()
    elif klass == "lot_expiry":
        typed, shape, held = b.expiry_shape(lot, expiry)
    elif klass == "lot_prefix":
        typed, shape, held = b.prefix_shape(lot)
    elif klass == "lot_punct":
        typed, shape, held = b.punct_shape(lot)
    elif klass == "lot_gs1":
        typed, shape, held = b.gs1_shape(lot, expiry, printed)
    else:
        rule, typed = near
        shape, note = f"near_miss:{rule}", f"recalled lot {lot}"
    if path == "scan":
        if klass == "lot_gs1":
            entry.update(scan=typed, lot="", ndc=printed)  # the scan itself in the shape
        elif klass in ("plain_exact", "near_miss"):
            entry.update(scan=b.scan_for(printed, typed, expiry), lot="", ndc=printed, expiry=None)
        else:  # typed alongside the scan of the same pack: they must agree
            entry.update(scan=b.scan_for(printed, lot, expiry), lot=typed, ndc=printed, expiry=None)
    else:
        entry["lot"] = typed
    return b.add(recall=recall, klass=klass, label="holder", entry=entry, held_out=held, path=path, note=note,
                 shape=f"{shape}; name:{name_shape}; ndc:{ndc_shape}")


def holders(b: Builder, choice: Choice):
    named = choice.by_class["named"]
    own = choice.pools["own_lots"]
    for klass in LOT_CLASSES[:-1]:
        made = 0
        for attempt in range(HOLDER_ROWS[klass] * 20):
            if made == HOLDER_ROWS[klass]:
                break
            recall = named[attempt % len(named)]
            lots = [(lot, exp) for lot, exp in own[recall.number] if _good_lot(lot)]
            if klass == "lot_gs1":
                lots = [(lot, exp) for lot, exp in lots if _GS1_LOT.match(lot)]
            if not lots:
                continue
            lot, exp = b.rng.choice(lots)
            _lot_level_holder(b, klass, recall, lot, exp)
            made += 1
    by_rule = defaultdict(list)  # each near-miss rule in turn, over every recall whose lots allow it
    for recall in named:
        for lot, exp in own[recall.number]:
            if _good_lot(lot):
                for rule, typed in _near_misses(lot).items():
                    by_rule[rule].append((recall, lot, exp, typed))
    rules = [rule for rule in NEAR_MISS_RULES if by_rule[rule]]
    for made in range(HOLDER_ROWS["near_miss"]):
        rule = rules[made % len(rules)]
        recall, lot, exp, typed = by_rule[rule][(made // len(rules) * 7 + made) % len(by_rule[rule])]
        _lot_level_holder(b, "near_miss", recall, lot, exp, near=(rule, typed))
    _brand_holders(b, "unknown_product_brand", choice.by_class["unknown"], own, exact=True)
    _brand_holders(b, "lot_level_no_ndc", choice.by_class["no_ndc"], own, exact=True)
    _brand_holders(b, "all_lots_brand_no_ndc", choice.by_class["all_lots_brand"], own, exact=False,
                   pool=choice.pools["lots"])
    _repackaged(b, choice)
    _all_lots_ndc(b, choice)
    _windows(b, choice, inside=True)


def _brand_holders(b: Builder, klass: str, recalls: list[Recall], own: dict, *, exact: bool, pool=None):
    for i in range(HOLDER_ROWS[klass]):
        recall = recalls[i % len(recalls)]
        if exact:
            lot, exp = b.rng.choice(own[recall.number])
        else:
            lot, exp = _far_lot(pool, [x for x, _ in own.get(recall.number, [])], b.rng), None
        dispensed = b.dispensed(recall, before=_day(exp, end=True) if exp else None)
        expiry = b.pack_expiry(dispensed, exp)
        shapes = ("head", "short", "upper") if klass != "lot_level_no_ndc" else ("head", "label", "upper")
        drug, name_shape = b.name(recall, shapes=shapes)
        path = b.path_for(klass)
        entry = {"dispensed_at": dispensed.isoformat()}
        entry["product_description" if b.rng.random() < 0.3 else "drug"] = drug
        lot_shape = "plain"
        if path == "scan":
            entry.update(scan=b.scan_for(None, lot, expiry), lot="")
        else:
            entry["lot"], lot_shape = b.exact_lot(recall, lot) if exact else (lot, "plain")
        b.add(recall=recall, klass=klass, label="holder", entry=entry, held_out=False, path=path,
              shape=f"{lot_shape}; name:{name_shape}")


def _repack_ndc(b: Builder, choice: Choice, recall: Recall) -> str | None:
    taken = set().union(*(r.products for v in choice.by_class.values() for r in v))
    labelers = {p[:5] for p in recall.products}
    from drugs.ndc import ndc_product, normalize_ndc

    options = [(ndc, strength) for ndc, strength, _ in choice.pools["repack"][recall.subject]
               if normalize_ndc(ndc)[:5] not in labelers and ndc_product(normalize_ndc(ndc)) not in taken]
    same = [ndc for ndc, strength in options if strength == recall.strength]
    options = sorted(same or [ndc for ndc, _ in options])
    return b.rng.choice(options) if options else None


def _abbreviation(b: Builder, recall: Recall) -> tuple[str, str, bool]:
    forms = ABBREVIATIONS[recall.subject]
    index = b.rng.randrange(len(forms))
    text = forms[index].replace("{s}", recall.strength)
    if b.rng.random() < 0.15:
        return _capitalised(text), "name/held-out-1", True
    return text, f"abbrev:{recall.subject}#{index + 1}", False


def _repackaged(b: Builder, choice: Choice):
    klass = "repackaged_abbrev"
    makers = choice.by_class["repackaged"]
    made = 0
    for attempt in range(HOLDER_ROWS[klass] * 10):
        if made == HOLDER_ROWS[klass]:
            break
        recall = makers[attempt % len(makers)]
        ndc = _repack_ndc(b, choice, recall)
        lots = choice.pools["own_lots"][recall.number]
        if not ndc or not lots:
            continue
        lot, exp = b.rng.choice(lots)
        dispensed = b.dispensed(recall, before=_day(exp, end=True) if exp else None)
        expiry = b.pack_expiry(dispensed, exp)
        drug, name_shape, held = _abbreviation(b, recall)
        path = b.path_for(klass)
        typed_ndc, ndc_shape = b.ndc_text(ndc)
        entry = {"drug": drug, "ndc": typed_ndc, "dispensed_at": dispensed.isoformat()}
        lot_shape = "plain"
        if path == "scan":
            entry.update(scan=b.scan_for(ndc, lot, expiry), lot="", ndc=ndc)
        else:
            entry["lot"], lot_shape = b.exact_lot(recall, lot)
        b.add(recall=recall, klass=klass, label="holder", entry=entry, held_out=held, path=path,
              shape=f"{lot_shape}; name:{name_shape}; ndc:{ndc_shape}", note=f"repackager NDC {ndc}")
        made += 1


def _all_lots_ndc(b: Builder, choice: Choice):
    klass = "all_lots_class1_ndc"
    recalls = choice.by_class["all_lots_ndc"]
    for i in range(HOLDER_ROWS[klass]):
        recall = recalls[i % len(recalls)]
        printed = b.rng.choice(recall.pack_ndcs())
        listed = choice.pools["own_lots"].get(recall.number) or []
        lot = b.rng.choice(listed)[0] if listed and b.rng.random() < 0.5 else _far_lot(
            choice.pools["lots"], [x for x, _ in listed], b.rng)
        dispensed = b.dispensed(recall)
        expiry = b.pack_expiry(dispensed, None)
        drug, name_shape = b.name(recall)
        path = b.path_for(klass)
        ndc, ndc_shape = b.ndc_text(printed)
        entry = {"drug": drug, "ndc": ndc, "dispensed_at": dispensed.isoformat()}
        shape, held = "plain", False
        if path == "scan":
            entry.update(scan=b.scan_for(printed, lot, expiry), lot="", ndc=printed)
        elif b.rng.random() < 0.4:
            entry["lot"], shape, held = b.expiry_shape(lot, expiry)
        else:
            entry["lot"] = lot
        b.add(recall=recall, klass=klass, label="holder", entry=entry, held_out=held, path=path,
              shape=f"{shape}; name:{name_shape}; ndc:{ndc_shape}")


def _window_dates(b: Builder, recall: Recall, inside: bool) -> tuple[datetime, date, str]:
    """(dispensed, pack expiry, what the row shows) for a window recall."""
    if recall.expiry_window:
        start, end = _day(recall.expiry_window[0], end=False), _day(recall.expiry_window[1], end=True)
        if inside:
            last = end or start + timedelta(days=600)
            expiry = _month_end(start + timedelta(days=b.rng.randint(31, max(31, (last - start).days - 31))))
            expiry = min(expiry, last) if end else expiry
            where = "expiry inside"
        elif end and b.rng.random() < 0.5:
            expiry, where = _month_end(end + timedelta(days=b.rng.randint(40, 400))), "expiry after the window"
        else:
            expiry = _month_end(start - timedelta(days=b.rng.randint(40, 400)))
            if expiry >= start:
                expiry = _last_day(*(lambda d: (d.year, d.month))(start - timedelta(days=40)))
            where = "expiry before the window"
        dispensed = b.dispensed(recall, before=expiry)
        return dispensed, expiry, where
    start, end = _day(recall.dispensed_window[0], end=False), _day(recall.dispensed_window[1], end=True)
    if inside:
        last = min(end or recall.initiated, recall.initiated)
        day = start + timedelta(days=b.rng.randint(0, max(0, (last - start).days)))
        dispensed, where = datetime(day.year, day.month, day.day, 11, 0, tzinfo=UTC), "dispensed inside"
    else:
        day = start - timedelta(days=b.rng.randint(30, 300))
        dispensed, where = datetime(day.year, day.month, day.day, 11, 0, tzinfo=UTC), "dispensed before the window"
    return dispensed, b.pack_expiry(dispensed, None), where


def _windows(b: Builder, choice: Choice, *, inside: bool):
    klass = "window_inside" if inside else "outside_window"
    count = HOLDER_ROWS[klass] if inside else DECOY_ROWS[klass]
    recalls = choice.by_class["window"]
    for i in range(count):
        recall = recalls[i % len(recalls)]
        printed = b.rng.choice(recall.pack_ndcs())
        lot = _far_lot(choice.pools["lots"], [x for x, _ in choice.pools["own_lots"].get(recall.number, [])], b.rng)
        dispensed, expiry, where = _window_dates(b, recall, inside)
        drug, name_shape = b.name(recall)
        path = b.path_for(klass)
        ndc, ndc_shape = b.ndc_text(printed)
        entry = {"drug": drug, "ndc": ndc, "dispensed_at": dispensed.isoformat()}
        shape, held = "expiry field", False
        if path == "scan":
            entry.update(scan=b.scan_for(printed, lot, expiry), lot="", ndc=printed)
            shape = "expiry in the scan"
        elif recall.expiry_window and b.rng.random() < 0.35:
            entry["lot"], shape, held = b.expiry_shape(lot, expiry, four_digit_year=True)
            shape = f"expiry in the lot field ({shape})"
        else:
            entry.update(lot=lot, expiry=expiry.isoformat())
        label = "holder" if inside else "decoy"
        b.add(recall=recall, klass=klass, label=label, decoy_kind="" if inside else klass, entry=entry,
              held_out=held, path=path, note=where, shape=f"{shape}; name:{name_shape}; ndc:{ndc_shape}")


# --- decoys ---------------------------------------------------------------------------------------------

def decoys(b: Builder, choice: Choice):
    own, others, pool = choice.pools["own_lots"], choice.pools["others"], choice.pools["lots"]
    lot_targets = choice.by_class["named"] + choice.by_class["repackaged"]
    brand_targets = choice.by_class["unknown"] + choice.by_class["no_ndc"]
    every_lot = [lot for lots in own.values() for lot, _ in lots]

    def other_product(recall):
        labelers = {p[:5] for p in recall.products}
        words = _naming_words(recall.raw["product_description"])
        options = [o for o in others if not ({p[:5] for p in o.products} & labelers)
                   and not (_naming_words(o.head) & words)]
        return b.rng.choice(options)

    def entry_for(recall, lot_text, *, ndc_of=None, name_of=None, lot_exp=None, scan_lot=None):
        source = name_of or recall
        dispensed = b.dispensed(recall, before=_day(lot_exp, end=True) if lot_exp else None)
        expiry = b.pack_expiry(dispensed, lot_exp)
        drug, name_shape = b.name(source)
        entry = {"drug": drug, "dispensed_at": dispensed.isoformat(), "lot": lot_text}
        printed = b.rng.choice(ndc_of.pack_ndcs()) if ndc_of else None
        if printed:
            entry["ndc"], ndc_shape = b.ndc_text(printed)
        else:
            ndc_shape = "none"
        return entry, printed, expiry, f"name:{name_shape}; ndc:{ndc_shape}"

    def add(kind, recall, entry, printed, expiry, shape, *, scan_lot, note="", held=False):
        path = b.path_for(kind)
        if path == "scan":
            entry = dict(entry, scan=b.scan_for(printed, scan_lot, expiry), ndc=printed or "")
            if scan_lot == entry["lot"] or kind != "decorated_other_lot":
                entry["lot"] = ""
        b.add(recall=recall, klass=kind, label="decoy", decoy_kind=kind, entry=entry, held_out=held, path=path,
              shape=shape, note=note)

    for i in range(DECOY_ROWS["same_lot_other_product"]):
        targets = lot_targets + brand_targets
        recall = targets[i % len(targets)]
        lot, exp = b.rng.choice(own[recall.number])
        other = other_product(recall)
        typed, lot_shape = b.exact_lot(recall, lot)
        entry, printed, expiry, shape = entry_for(recall, typed, ndc_of=other, name_of=other, lot_exp=exp)
        add("same_lot_other_product", recall, entry, printed, expiry, f"{lot_shape}; {shape}", scan_lot=lot,
            note=f"other product: {other.number}")
    for i in range(DECOY_ROWS["same_lot_no_ndc_other_name"]):
        targets = brand_targets + lot_targets
        recall = targets[i % len(targets)]
        lot, exp = b.rng.choice(own[recall.number])
        other = other_product(recall)
        typed, lot_shape = b.exact_lot(recall, lot)
        entry, printed, expiry, shape = entry_for(recall, typed, name_of=other, lot_exp=exp)
        add("same_lot_no_ndc_other_name", recall, entry, None, expiry, f"{lot_shape}; {shape}", scan_lot=lot,
            note=f"name of {other.number}")
    for kind in ("same_product_other_lot", "decorated_other_lot"):
        for i in range(DECOY_ROWS[kind]):
            recall = lot_targets[(i * 3 + (kind == "decorated_other_lot")) % len(lot_targets)]
            lot = _far_lot(pool, every_lot, b.rng)
            entry, printed, expiry, shape = entry_for(recall, lot, ndc_of=recall)
            held = False
            if kind == "decorated_other_lot":
                if b.rng.random() < 0.6:
                    entry["lot"], lot_shape, held = b.expiry_shape(lot, expiry)
                else:
                    entry["lot"], lot_shape, held = b.prefix_shape(lot)
                shape = f"{lot_shape}; {shape}"
            add(kind, recall, entry, printed, expiry, shape, scan_lot=lot, held=held)
    made = 0
    for attempt in range(DECOY_ROWS["lot_one_char_off"] * 10):
        if made == DECOY_ROWS["lot_one_char_off"]:
            break
        recall = choice.by_class["named"][attempt % len(choice.by_class["named"])]
        lot, exp = b.rng.choice(own[recall.number])
        off = _one_char_off(lot, set(every_lot), b.rng)
        if not off:
            continue
        entry, printed, expiry, shape = entry_for(recall, off, ndc_of=recall, lot_exp=exp)
        add("lot_one_char_off", recall, entry, printed, expiry, f"plain; {shape}", scan_lot=off,
            note=f"recalled lot {lot}")
        made += 1
    for i in range(DECOY_ROWS["other_drug"]):
        recall = lot_targets[(i * 5) % len(lot_targets)]
        other = other_product(recall)
        other_lot = b.rng.choice([lot for lot, _ in other.lots if _good_lot(lot)] or [_far_lot(pool, every_lot, b.rng)])
        entry, printed, expiry, shape = entry_for(recall, other_lot, ndc_of=other, name_of=other)
        add("other_drug", recall, entry, printed, expiry, f"plain; {shape}", scan_lot=other_lot,
            note=f"product of {other.number}")
    _windows(b, choice, inside=False)
    _other_labeler(b, choice)


def _other_labeler(b: Builder, choice: Choice):
    kind = "all_lots_other_labeler"
    taken = set().union(*(r.products for v in choice.by_class.values() for r in v))
    everything = choice.pools["all"].values()
    targets = []
    for recall in choice.by_class["window"] + choice.by_class["all_lots_ndc"]:
        labelers = {p[:5] for p in recall.products}
        options = sorted({n for r in everything if r.subject == recall.subject and r.number != recall.number
                          for n in r.printed_ndcs(r.products)
                          if n.split("-")[0].zfill(5) not in labelers
                          and not any(n2 in taken for n2 in _products_of(n))})
        if options:
            targets.append((recall, options))
    for i in range(DECOY_ROWS[kind]):
        recall, options = targets[i % len(targets)]
        printed = b.rng.choice(options)
        lot = _far_lot(choice.pools["lots"], [], b.rng)
        if recall.kind == "all_lots_window":
            dispensed, expiry, _ = _window_dates(b, recall, inside=True)
        else:
            dispensed = b.dispensed(recall)
            expiry = b.pack_expiry(dispensed, None)
        drug, name_shape = b.name(recall, shapes=("head", "upper"))
        ndc, ndc_shape = b.ndc_text(printed)
        entry = {"drug": drug, "ndc": ndc, "lot": lot, "expiry": expiry.isoformat(),
                 "dispensed_at": dispensed.isoformat()}
        path = b.path_for(kind)
        if path == "scan":
            entry.update(scan=b.scan_for(printed, lot, expiry), lot="", ndc=printed, expiry=None)
        b.add(recall=recall, klass=kind, label="decoy", decoy_kind=kind, entry=entry, held_out=False, path=path,
              shape=f"plain; name:{name_shape}; ndc:{ndc_shape}", note=f"another labeler's NDC {printed}")


def _products_of(printed: str) -> set[str]:
    from drugs.ndc import ndc_product, normalize_ndc

    return {ndc_product(normalize_ndc(printed))}


# --- malformed rows: refused with a clear error, nothing written; then entered again corrected ---------------

DEFECTS = {
    "admin": [("lot", {"lot": ""}, "no lot and 'lot unknown' not ticked"),
              ("ndc", {"ndc": "12345-12-1"}, "an NDC of 8 digits"),
              ("quantity", {"quantity": 0}, "a quantity of nothing"),
              ("expiry", {"expiry": "BEFORE"}, "an expiry before the dispensing")],
    "csv": [("lot", {"lot": ""}, "no lot and lot_unknown empty"),
            ("dispensed_at", {"dispensed_at": "2021/13/45"}, "a date that is none"),
            ("quantity", {"quantity": "-3"}, "a negative quantity"),
            ("ndc", {"ndc": "ABC-DEFG-HI"}, "an NDC of letters")],
    "api": [("lot", {"lot": ""}, "an empty lot"),
            ("quantity", {"quantity": 0}, "a quantity of nothing"),
            ("dispensed_at", {"dispensed_at": "yesterday"}, "no instant"),
            ("ndc", {"ndc": "1234"}, "an NDC of 4 digits")],
    "fhir": [("status", {"fhir_status": "in-progress"}, "a dispense not completed"),
             ("whenHandedOver", {"dispensed_at": "DATE_ONLY"}, "a bare date where FHIR needs an instant here"),
             ("medicationReference", {"fhir_reference": "Medication/123"}, "the medication not contained"),
             ("subject", {"fhir_subject": "Group/1"}, "a subject that is no patient")],
    "scan": [("scan", {"scan": "BAD_CHECK_DIGIT"}, "a GTIN whose check digit is wrong"),
             ("lot", {"lot": "OTHER_LOT"}, "a typed lot that is not the scanned one"),
             ("scan", {"scan": "(01)0030"}, "a cut-off barcode"),
             ("ndc", {"ndc": "OTHER_NDC"}, "a typed NDC that is not the scanned pack")],
}


def malformed(b: Builder, choice: Choice):
    named = choice.by_class["named"]
    own = choice.pools["own_lots"]
    i = 0
    for path, defects in DEFECTS.items():
        for field_name, change, why in defects:
            recall = named[i % len(named)]
            i += 1
            lot, exp = b.rng.choice([(x, e) for x, e in own[recall.number] if _GS1_LOT.match(x)] or own[recall.number])
            printed = b.rng.choice(recall.printed_ndcs())
            dispensed = b.dispensed(recall, before=_day(exp, end=True) if exp else None)
            expiry = b.pack_expiry(dispensed, exp)
            drug, _ = b.name(recall)
            good = {"drug": drug, "ndc": printed, "lot": lot, "dispensed_at": dispensed.isoformat(),
                    "quantity": b.rng.choice((30, 60, 90))}
            if path == "scan":
                good.update(scan=b.scan_for(printed, lot, expiry), lot="")
            bad = dict(good)
            for key, value in change.items():
                if value == "BEFORE":
                    value = (dispensed.date() - timedelta(days=40)).isoformat()
                elif value == "DATE_ONLY":
                    value = dispensed.date().isoformat()
                elif value == "BAD_CHECK_DIGIT":
                    value = good["scan"].replace(good["scan"][:16], _wrong_check(good["scan"][:16]), 1)
                elif value == "OTHER_LOT":
                    value = _far_lot(choice.pools["lots"], [x for x, _ in own[recall.number]], b.rng)
                elif value == "OTHER_NDC":
                    value = b.rng.choice(choice.pools["others"]).printed_ndcs()[0]
                bad[key] = value
            row = b.add(recall=recall, klass="malformed", label="malformed", entry=bad, held_out=False, path=path,
                        shape=f"defect:{field_name}", note=why,
                        defect={"field": field_name, "why": why})
            row["corrected"] = dict(good, site=row["entry"]["site"],
                                    product_description="", serial="", expiry=None, **({} if path == "scan" else
                                                                                       {"scan": ""}))
            row["acceptable"], row["notice"] = list(HOLDER_CLASSES), ("required" if recall.open else
                                                                      "closed_on_arrival")
            row["ideal"] = "confirmed"


def _wrong_check(prefix: str) -> str:
    """The printed '(01)' + 14-digit GTIN... prefix of a scan with its check digit changed; raw scans
    start '01' or ']d201', so the GTIN is found by its position after the first '01'."""
    at = prefix.find("01") + 2
    gtin = prefix[at:at + 14]
    wrong = gtin[:-1] + str((int(gtin[-1]) + 1) % 10)
    return prefix[:at] + wrong + prefix[at + 14:]


# --- main ---------------------------------------------------------------------------------------------------

def build(seed: int) -> dict:
    recalls = read_recalls()
    choice = choose(recalls, seed)
    b = Builder(choice, seed)
    holders(b, choice)
    decoys(b, choice)
    malformed(b, choice)
    used = sorted(b.recalls.values(), key=lambda r: r.number)
    chosen_as = {r.number: cls for cls, rs in choice.by_class.items() for r in rs}
    return {
        "about": ("Labelled SYNTHETIC dispensing rows over REAL openFDA recalls (tests/fixtures/openfda). Written by "
                  "bench/long_tail_corpus.py; read by tests/acceptance/test_long_tail_corpus.py."),
        "seed": seed,
        "holder_kinds": HOLDER_KINDS,
        "decoy_kinds": DECOY_KINDS,
        "labels": {
            "holder": "found by exposure in any match class; never told 'safe'; a notice drafted after the sweep "
                      "(notice 'closed_on_arrival': the record is already Terminated/Completed when it arrives, "
                      "which drafts no letter by design, docs/reasoning.md)",
            "decoy": "never 'confirmed'; its match class is one of `acceptable` (null: not exposed); no notice for "
                     "that recall unless `notice` is 'only_if_candidate' and the class is candidate",
            "malformed": "refused by its path with a clear error, nothing written; `corrected` is then entered and "
                         "is a holder",
        },
        "recalls": [{"recall_number": r.number, "snapshot": SOURCES[r.source], "chosen_as": chosen_as.get(r.number),
                     "classification": r.classification, "status": r.status, "scope": r.kind,
                     "subject": r.subject, "identity_source": r.identity_source,
                     "ndc_products": sorted(r.products), "named_ndc_products": sorted(r.named),
                     "lots": [lot for lot, _ in r.lots][:40]} for r in used],
        "rows": b.rows,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    corpus = build(args.seed)
    args.out.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n")
    counts = defaultdict(int)
    for row in corpus["rows"]:
        counts[(row["label"], row["class"])] += 1
    sources = defaultdict(int)
    for recall in corpus["recalls"]:
        sources[recall["snapshot"]] += 1
    print(f"{len(corpus['rows'])} rows over {len(corpus['recalls'])} recalls ({dict(sources)}) -> {args.out}")
    for (label, klass), n in sorted(counts.items()):
        print(f"  {label:10s} {klass:28s} {n}")


if __name__ == "__main__":
    main()
