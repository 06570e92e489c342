"""What a recall fact means: the one home for severity, "active", scope, fact keys and prose.

Pure functions over a fact-like object (anything with `.kind`, `.subject`, `.lot`, `.attributes`,
`.fact_key`), so the reasoner, the guardrail, exposure, the sweep and the review screens read a
recall the same way. Attributes are the ones recalls.ingest writes (docs/facts.md).
"""

import re

from django.utils.translation import gettext_lazy as _

from .display import display_name
from .identity import is_product_key, readable
from .ndc import ndc_products as _ndc_products

RECALL_KIND = "recall"
CLOSED_STATUSES = frozenset({"Terminated", "Completed"})
CLASS_SEVERITY = {"Class I": 3, "Class II": 2, "Class III": 1}
FACT_KEY_PREFIX = "recall:"

# How sure a match is (drugs.matching.MatchClass), in words: a short name for tables and reports, and
# one saying what the class rests on for the review card. "asked": a correction of an answer the
# patient asked for, not a match.
MATCH_CLASS_WORDS = {
    "confirmed": (_("Confirmed"), _("Confirmed (NDC product and lot)")),
    "probable": (_("Probable"), _("Probable (lot and product or ingredients agree, not confirmed)")),
    "product_all_lots": (_("Product, all lots"), _("Product on an all-lots recall")),
    "candidate": (_("Candidate"), _("Candidate (the product or the lot could not be compared)")),
    "asked": (_("Asked"), _("Asked (answer on record)")),
}


def match_class_label(klass: str, *, detail: bool = False) -> str:
    """The words for a match class: short, or (detail) with what it rests on; "" for none."""
    words = MATCH_CLASS_WORDS.get(str(klass or ""))
    return str(words[1 if detail else 0]) if words else ""


RECORD_MARK = ":record:"


def fact_key(recall_number: str, lot: str | None, record: str = "") -> str:
    """'recall:D-0326-2019:lot:3069020', or 'recall:D-0326-2019:drug' for a fact about every lot.
    `record` tells apart another record FDA published under the same number (a different event or
    product): 'recall:D-0418-2015:record:71234:lot:X', still under the number's key_prefix."""
    number = f"{recall_number}{RECORD_MARK}{record}" if record else recall_number
    return f"{FACT_KEY_PREFIX}{number}:lot:{lot}" if lot else f"{FACT_KEY_PREFIX}{number}:drug"


def key_prefix(recall_number: str, record: str | None = None) -> str:
    """Prefix shared by every fact of one recall number, every record under it included (fact_key__startswith
    uses the fact_key index); with `record`, of that one other record only."""
    return f"{FACT_KEY_PREFIX}{recall_number}{RECORD_MARK}{record}:" if record else f"{FACT_KEY_PREFIX}{recall_number}:"


def recall_number_of_key(key: str) -> str:
    """'recall:D-0326-2019:lot:3069020' -> 'D-0326-2019'; '' for other keys."""
    if not key or not key.startswith(FACT_KEY_PREFIX):
        return ""
    return key[len(FACT_KEY_PREFIX):].split(":", 1)[0]


def _attrs(fact) -> dict:
    return (getattr(fact, "attributes", None) or {}) if fact is not None else {}


def is_recall(fact) -> bool:
    return fact is not None and getattr(fact, "kind", None) == RECALL_KIND


def recall_number(fact) -> str:
    return _attrs(fact).get("recall_number") or recall_number_of_key(getattr(fact, "fact_key", ""))


def classification(fact) -> str:
    return _attrs(fact).get("classification", "")


def severity(fact) -> int:
    """3 for Class I ... 1 for Class III; 0 for no fact, a non-recall or an unclassified recall."""
    if not is_recall(fact):
        return 0
    return CLASS_SEVERITY.get(classification(fact), 0)


def is_active(fact) -> bool:
    """Not terminated or completed. "Terminated" means FDA saw reasonable removal efforts, not that a
    dispensed recalled pack became safe; callers decide what a closed recall still means."""
    return fact is not None and _attrs(fact).get("status") not in CLOSED_STATUSES


def is_drug_level(fact) -> bool:
    """About every lot of the product (the recall names none, or says all lots)."""
    return _attrs(fact).get("scope") == "drug" or not getattr(fact, "lot", None)


def scope(fact) -> str:
    return "drug" if is_drug_level(fact) else "lot"


def lot_scope(fact) -> dict | None:
    """attributes["lot_scope"] (recalls.lots.parse_scope; docs/developer.md, shared contracts), when ingested."""
    value = _attrs(fact).get("lot_scope")
    return value if isinstance(value, dict) else None


def products(fact) -> set[str]:
    """NDC products ('00378-5814') the recall names: `ndc_products` from ingestion, else from `ndcs`."""
    attrs = _attrs(fact)
    listed = attrs.get("ndc_products")
    return set(listed) if listed is not None else _ndc_products(attrs.get("ndcs"))


def package_ndcs(fact) -> list[str]:
    """The package NDC-11s the record lists (text and openFDA block), as ingestion normalised them."""
    return list(_attrs(fact).get("ndcs") or ())


def named_products(fact) -> set[str]:
    """NDC products the recall's own text (description, code_info) names, when it names any; else every
    product it lists. openFDA's block lists every strength of the listing, also those not recalled
    (D-0293-2021 recalls Daytrana 10 mg, NDC 68968-5552, and its block lists 5552 to 5555), so only a
    product the text names confirms a match; a product only the block lists makes it probable."""
    named = _attrs(fact).get("named_ndc_products")
    return set(named) if named else products(fact)


def short_product(description: str) -> str:
    """'Valsartan Tablets, USP 160 mg, 90-count bottles, Rx Only, ...' -> 'Valsartan Tablets, USP 160 mg'.
    The product as ingestion writes it into a recall fact's statement (recalls.ingest): statements are
    hashed into the fact's content, so this wording stays as it is. What a patient reads is
    product_name (drugs.display.display_name)."""
    # Runs of spaces as printed in real records ("HCG  10,000U/1ML  INJ") are one space in prose.
    parts, text = " ".join((description or "").split()).split(","), ""
    for part in parts:
        text = f"{text},{part}" if text else part
        if len(text) >= 25:
            break
    return text.strip()[:120]


def product_name(fact) -> str:
    """The recalled product as a patient reads it: the label's naming words (drugs.display), else the
    recall's identity in words; never an internal key."""
    a = _attrs(fact)
    return display_name(a.get("product_description") or "", a.get("firm") or "") or \
        readable_product(getattr(fact, "subject", "") or "") or "an unnamed product"


def readable_product(key: str) -> str:
    """An identity key in words for people: ingredients joined by "and"; a product key's own words
    (drugs.identity.product_key) in clean case; "" for none."""
    return display_name(readable(key)) if is_product_key(key) else readable(key)


# --- which lots a recall covers ----------------------------------------------------------------

COVERS_EVERY_LOT = "(the recall covers every lot)"  # recalls.ingest.recall_statement's two drug-level phrasings
NAMES_NO_LOT = "(the recall names no lot number"
_MONTHS = ("January February March April May June July August September October November December").split()


def every_lot_treated_as_affected(fact) -> bool:
    """Ingestion treats every lot of a recall that names none as affected (over-notify): the stored
    scope says "all_lots" although the text may never have said so."""
    return (lot_scope(fact) or {}).get("kind", "").startswith("all_lots")


def covers_every_lot(fact) -> bool:
    """The recall text says every lot is recalled (not merely that it names none we could read)."""
    statement = getattr(fact, "statement", "") or ""
    if COVERS_EVERY_LOT in statement:
        return True
    if NAMES_NO_LOT in statement:
        return False
    # A statement in neither phrasing (written before they existed): the stored scope decides.
    return every_lot_treated_as_affected(fact)


def every_lot_recalled(fact) -> bool:
    """Every lot of the recalled product is (or is treated as) recalled, within its window if it has one:
    no unaffected lot of that product to replace a pack from."""
    return is_drug_level(fact) and (covers_every_lot(fact) or every_lot_treated_as_affected(fact))


def date_words(value) -> str:
    """'2018-07' -> 'July 2018', '2019-03-04' -> 'March 4, 2019', '2019' -> '2019' (as precise as written)."""
    text = str(value or "")
    parts = text.split("-")
    try:
        if len(parts) == 1 and len(text) == 4:
            return text
        month = _MONTHS[int(parts[1]) - 1]
        return f"{month} {int(parts[2])}, {parts[0]}" if len(parts) > 2 else f"{month} {parts[0]}"
    except (ValueError, IndexError):
        return text


def _span(window) -> str:
    start, end = (list(window or []) + [None, None])[:2]
    if start and end:
        return f"from {date_words(start)} to {date_words(end)}"
    if start:
        return f"on or after {date_words(start)}"
    return f"up to {date_words(end)}" if end else ""


def window_words(fact) -> str:
    """The window an all-lots recall is limited to, in words ("" for none): 'with an expiry date from July
    2018 to June 2020', 'dispensed on or after August 26, 2019'. Only the windows drugs.matching applies."""
    scope = lot_scope(fact) or {}
    if scope.get("kind") != "all_lots_window":
        return ""
    expiry, dispensed = _span(scope.get("expiry_window")), _span(scope.get("dispensed_window"))
    if expiry:
        return f"with an expiry date {expiry}"
    return f"distributed or dispensed {dispensed}" if dispensed else ""


def window_kind(fact) -> str:
    """Which window of the recall's lot scope drugs.matching reads a pack's date against:
    'expiry_window', 'dispensed_window' or '' (none)."""
    scope = lot_scope(fact) or {}
    if scope.get("kind") != "all_lots_window":
        return ""
    return next((name for name in ("expiry_window", "dispensed_window") if scope.get(name)), "")


def covered_lots(fact) -> str:
    """What a recall covers, in words true of its record: 'lot 3069020', 'every lot', 'every lot with an
    expiry date from July 2018 to June 2020', or, for a recall in which no lot number could be read,
    'every lot (no lot number could be read from the recall, so every lot is treated as affected)'."""
    if not is_drug_level(fact):
        return f"lot {fact.lot}"
    window = window_words(fact)
    if window:
        return f"every lot {window}"
    if covers_every_lot(fact):
        return "every lot"
    if every_lot_treated_as_affected(fact):
        return "every lot (no lot number could be read from the recall, so every lot is treated as affected)"
    return "lots it does not list"


def describe(fact) -> str:
    """One sentence for people: 'Class II recall D-0326-2019 (Ongoing) of Valsartan Tablets 160 mg, lot
    3069020: “<the FDA's reason>”'. Names the product by its label (product_name), never a key; the
    reason is quoted, as the FDA wrote it."""
    a = _attrs(fact)
    reason = " ".join((a.get("reason") or "").split()).rstrip(".")
    return (f"{a.get('classification') or 'Unclassified'} recall {recall_number(fact) or 'without a number'} "
            f"({a.get('status') or 'status unknown'}) of {product_name(fact)}, {covered_lots(fact)}"
            f"{': “' + reason + '”' if reason else ''}")


_STATEMENT_PRODUCT = re.compile(r"\) of (?P<product>.+?)(?:, all lots \(| lot \S+ by )")


def product_names(fact) -> list[str]:
    """The product texts a recall names (its description's naming part, openFDA brand and generic
    names): what a dispensing of a product the vocabulary cannot name is compared with, beside the
    subject a recall may have been reduced to. Facts written before ingestion kept them fall back to the
    text the identity was read from and the product their statement names."""
    attrs = _attrs(fact)
    names = attrs.get("product_names")
    if isinstance(names, list):
        return [name for name in names if isinstance(name, str) and name]
    fallback = [attrs.get("identity_text") or ""]
    found = _STATEMENT_PRODUCT.search(getattr(fact, "statement", "") or "")
    if found:
        fallback.append(found.group("product"))
    return [name for name in fallback if name]
