"""Does a recall fact apply to a dispensing, and how sure are we? One function for exposure, the
reasoner and the sweep.

    match(fact, dispensing) -> MatchClass | None

- confirmed: the dispensing's NDC product is one the recall's own text names, and its lot is the
  recalled lot.
- probable: the recalled lot, and either the same ingredients (identity key) with the product not
  confirmed (the dispensing has no NDC, or the recall names no products), or a product that only
  openFDA's listing block names (it lists every strength of the listing, also those not recalled).
- product_all_lots: the recall covers every lot (of its expiry window, when it states one) and the
  dispensing's NDC product is one its text names.
- candidate: same ingredients but no lot to compare (the dispensing's lot is unknown, or a drug-level
  recall names no products / the dispensing no NDC). A pharmacist checks it; never told to a patient
  as if confirmed.

A lot never matches on its own: lots are unique only within a manufacturer's product, so a lot
match needs the product (NDC) or the ingredients to agree, and a known NDC of a product the recall
does not name rules the lot coincidence out. An NDC product + lot match stands even when identity
keys differ (an unresolved recall subject, a brand entered at the till).

`dispensing` is anything with `.drug` (identity key), `.ndc` (5-4-2 or ""), `.lot`, and optionally
`.lot_known`, `.expiry` (date) and `.dispensed_at` (datetime).
"""

from datetime import date, datetime
from enum import StrEnum

from . import recall_terms
from .lots import normalize_lot
from .ndc import ndc_product


class MatchClass(StrEnum):
    CONFIRMED = "confirmed"
    PROBABLE = "probable"
    PRODUCT_ALL_LOTS = "product_all_lots"
    CANDIDATE = "candidate"

    @property
    def label(self) -> str:
        return {"confirmed": "Confirmed (NDC product and lot)", "probable": "Probable (ingredients and lot)",
                "product_all_lots": "Product on an all-lots recall",
                "candidate": "Candidate (ingredients only, no lot information)"}[self.value]


# Most certain first: the strongest of several matches is the one with the lowest rank.
CERTAINTY_RANK = {klass.value: rank for rank, klass in enumerate(MatchClass)}


def lot_known(dispensing) -> bool:
    return bool(getattr(dispensing, "lot", "")) and getattr(dispensing, "lot_known", True) is not False


def dispensing_product(dispensing) -> str:
    return getattr(dispensing, "ndc_product", "") or ndc_product(getattr(dispensing, "ndc", "") or "")


def _day(value) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and value:
        try:
            return date.fromisoformat(value[:10])
        except ValueError:
            return None
    return None


def _outside(window, day: date | None) -> bool:
    """True only when both the window and the day are known and the day falls outside it."""
    if not window or day is None:
        return False
    start, end = (_day(window[0]) if len(window) > 0 else None), (_day(window[1]) if len(window) > 1 else None)
    return bool((start and day < start) or (end and day > end))


def within_lot_scope(fact, dispensing) -> bool:
    """An all-lots recall limited to an expiry or distribution window excludes a dispensing known to be
    outside it; unknown expiry or date stays in (fail safe)."""
    scope = recall_terms.lot_scope(fact)
    if not scope or scope.get("kind") != "all_lots_window":
        return True
    if _outside(scope.get("expiry_window"), _day(getattr(dispensing, "expiry", None))):
        return False
    return not _outside(scope.get("dispensed_window"), _day(getattr(dispensing, "dispensed_at", None)))


def match(fact, dispensing) -> MatchClass | None:
    if not recall_terms.is_recall(fact):
        return None
    products = recall_terms.products(fact)  # every product the record lists (text and openFDA block)
    product = dispensing_product(dispensing)
    same_product = bool(product) and product in recall_terms.named_products(fact)
    listed_only = bool(product) and product in products and not same_product
    other_product = bool(product) and bool(products) and product not in products
    same_drug = bool(fact.subject) and fact.subject == (getattr(dispensing, "drug", "") or "")
    plausible = listed_only or (same_drug and not other_product)  # not confirmed, not ruled out
    if fact.lot and not recall_terms.is_drug_level(fact):
        if not lot_known(dispensing):
            return MatchClass.CANDIDATE if (same_product or plausible) else None
        if normalize_lot(dispensing.lot) != normalize_lot(fact.lot):
            return None
        if same_product:
            return MatchClass.CONFIRMED
        return MatchClass.PROBABLE if plausible else None
    if not within_lot_scope(fact, dispensing):
        return None
    if same_product:
        return MatchClass.PRODUCT_ALL_LOTS
    return MatchClass.CANDIDATE if plausible else None
