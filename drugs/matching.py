"""Does a recall fact apply to a dispensing, and how sure are we? One function for exposure, the
reasoner and the sweep.

    match(fact, dispensing) -> MatchClass | None

- confirmed: the dispensing's NDC product is one the recall's own text names, and its lot is the
  recalled lot (canonical lots equal: drugs.lots).
- probable: the recalled lot, and either the same ingredients (identity key) with the product not
  confirmed (the dispensing has no NDC, the recall names no products, or another labeler's NDC: a
  repackaged or relabeled pack of the manufacturer's lot), or a product that only openFDA's listing
  block names (it lists every strength of the listing, also those not recalled), or, for a product
  the vocabulary cannot name, the same product text. Also a near-miss lot (leading zeros, O/0, I/1,
  a dropped suffix) of the same product or ingredients, with the rule named.
- product_all_lots: the recall covers every lot (of its expiry window, when it states one) and the
  dispensing's NDC product is one its text names.
- candidate: same ingredients but no lot to compare (the dispensing's lot is unknown, or a drug-level
  recall names no products / the dispensing no NDC). A pharmacist checks it; never told to a patient
  as if confirmed.

A lot never matches on its own: lots are unique only within a manufacturer's product, so a lot
match needs the product (NDC) or the ingredients to agree, and a known NDC of a product the recall
does not name rules a lot coincidence out unless the ingredients agree as well (a repackager). An
NDC product + lot match stands even when identity keys differ (an unresolved recall subject, a brand
entered at the till).

`explain(fact, dispensing)` gives the class with the rule that made it (`Found`).

`dispensing` is a `Dispensed`: the values matching reads of one dispensing (identity key, NDC and
its product, lot and whether it is known, expiry, when dispensed), computed once where the row is
built (ask.beliefs.DispensedRow.matched, patients.DispensingRecord.as_dispensed(), a sweep page's rows,
a shelf unit's probe). Matching reads them as values and calls no code of the layer that holds the
row. Anything with the same attributes is read the same way (`.ndc_product` may be left out: it is
then read from `.ndc`; `.lot_known`, `.expiry` and `.dispensed_at` are optional).
"""

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum

from . import recall_terms
from .identity import is_product_key, texts_agree
from .lot_field import is_date_shaped
from .lots import canonical_lot, near_miss_rule, printed_lot
from .ndc import ndc_product, ten_digit_forms


class MatchClass(StrEnum):
    CONFIRMED = "confirmed"
    PROBABLE = "probable"
    PRODUCT_ALL_LOTS = "product_all_lots"
    CANDIDATE = "candidate"

    @property
    def label(self) -> str:
        return recall_terms.match_class_label(self.value, detail=True)


# Most certain first: the strongest of several matches is the one with the lowest rank.
CERTAINTY_RANK = {klass.value: rank for rank, klass in enumerate(MatchClass)}
# The classes that make a pack a recalled one (its lot, or its product on a recall of every lot); the others
# say it may be.
RECALLED_PACK = frozenset({MatchClass.CONFIRMED, MatchClass.PRODUCT_ALL_LOTS})


@dataclass(frozen=True)
class Dispensed:
    """One dispensing as matching reads it: plain values, computed where the row is built."""

    drug: str = ""  # identity key (drugs.identity), "" when nothing names the drug
    ndc: str = ""  # 5-4-2 package NDC, "" when unknown
    ndc_product: str = ""  # its labeler + product part ("00378-5814"): what a lot is read against
    lot: str = ""
    lot_known: bool = True  # False: the lot was not recorded (a candidate at most, never a lot match)
    expiry: date | None = None
    dispensed_at: datetime | date | None = None
    # Other canonical lots the lot field may mean (drugs.lot_field): a recall lot among them is probable.
    lot_alternatives: tuple[str, ...] = ()


def dispensed(*, drug: str = "", ndc: str = "", lot: str = "", lot_unknown: bool = False, expiry=None,
              dispensed_at=None, product: str = "", alternatives=()) -> Dispensed:
    """A Dispensed from a dispensing's columns: the NDC product is `product` (a stored column) or read
    from the NDC, as dispensing_product does."""
    return Dispensed(drug=drug or "", ndc=ndc or "", ndc_product=product or ndc_product(ndc or ""), lot=lot or "",
                     lot_known=not lot_unknown, expiry=expiry, dispensed_at=dispensed_at,
                     lot_alternatives=tuple(alternatives or ()))


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


def _bound(value, *, end: bool) -> date | None:
    """A window end as a day. Windows keep the precision they were written with ("2020-06", "2019"): a start
    is the first day of its month or year, an end the last, so "expiry 7/2018 to 6/2020" covers a pack
    expiring 2020-06-30."""
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}(?:-\d{2})?", value):
        return _day(value)
    year, month = int(value[:4]), int(value[5:7]) if len(value) > 4 else None
    if month is None:
        return date(year, 12, 31) if end else date(year, 1, 1)
    if not 1 <= month <= 12:
        return None
    return date(year, month, calendar.monthrange(year, month)[1] if end else 1)


def _outside(window, day: date | None) -> bool:
    """True only when both the window and the day are known and the day falls outside it."""
    if not window or day is None:
        return False
    start = _bound(window[0], end=False) if len(window) > 0 else None
    end = _bound(window[1], end=True) if len(window) > 1 else None
    return bool((start and day < start) or (end and day > end))


def window_date_on_record(fact, dispensing) -> bool:
    """Whether the pack has the date an all-lots window recall is read against (its expiry for an expiry
    window, its dispensing date for a dispensing window). Without it within_lot_scope keeps the pack in
    (fail safe), but an answer may not say the window includes it."""
    kind = recall_terms.window_kind(fact)
    if kind == "expiry_window":
        return getattr(dispensing, "expiry", None) is not None
    if kind == "dispensed_window":
        return getattr(dispensing, "dispensed_at", None) is not None
    return True


def stated_class(klass, fact, rows) -> str:
    """The match as a letter, a worklist row or the pack check may state it: a product of an all-lots recall
    limited to a window is a recalled pack only when a pack's date is on record (within_lot_scope kept it
    in, so the window includes it); without the date the pack may be one of them, as a probable match is.
    The decision is not changed by this (a pack with no date stays in, fail safe): only what is said of it."""
    if klass == MatchClass.PRODUCT_ALL_LOTS and not any(window_date_on_record(fact, row) for row in rows):
        return MatchClass.PROBABLE
    return klass


def within_lot_scope(fact, dispensing) -> bool:
    """An all-lots recall limited to an expiry or distribution window excludes a dispensing known to be
    outside it; unknown expiry or date stays in (fail safe). A distribution window excludes only what
    was dispensed before it opened: a pack the firm distributed before its end can reach the patient
    after it, so the end never drops a patient."""
    scope = recall_terms.lot_scope(fact)
    if not scope or scope.get("kind") != "all_lots_window":
        return True
    if _outside(scope.get("expiry_window"), _day(getattr(dispensing, "expiry", None))):
        return False
    distributed = scope.get("dispensed_window")
    return not _outside([distributed[0], None] if distributed else None,
                        _day(getattr(dispensing, "dispensed_at", None)))


@dataclass(frozen=True)
class Found:
    """A match and the rule that made it (shown to the pharmacist beside the class)."""

    klass: MatchClass
    rule: str


def _near_rule(fact, dispensing) -> tuple[bool, str | None]:
    """(exact, near-miss rule) of the dispensing's lot against the recall's lot."""
    if canonical_lot(dispensing.lot) == canonical_lot(fact.lot):
        return True, None
    return False, near_miss_rule(fact.lot, dispensing.lot)


def _texts_agree(fact, drug: str) -> bool:
    """A product the vocabulary cannot name, on either side: does the dispensing's product text agree
    with the recall's subject or with one of the recall's product names (its brand and product line,
    kept beside any ingredient it was reduced to)?"""
    if not drug:
        return False
    if fact.subject and (is_product_key(drug) or is_product_key(fact.subject)) and texts_agree(fact.subject, drug):
        return True
    return is_product_key(drug) and any(texts_agree(name, drug) for name in recall_terms.product_names(fact))


def _shared_ingredient(fact, drug: str) -> bool:
    """Both name ingredients, some but not all of them shared, and the two may be one product: a recall
    subject reduced to one ingredient of the combination its text names (the pack's other ingredients are
    in the recall's product names), or a pack named by fewer ingredients than the recall (a name cut
    short). A combination pack sharing one ingredient with a recall of a single-ingredient product is
    another product (valsartan/HCTZ, sacubitril/valsartan against valsartan tablets)."""
    if not fact.subject or not drug or is_product_key(fact.subject) or is_product_key(drug) or fact.subject == drug:
        return False
    recalled, dispensed = set(fact.subject.split("+")), set(drug.split("+"))
    if not recalled & dispensed:
        return False
    extra = dispensed - recalled
    if not extra:
        return True
    named = " ".join([*recall_terms.product_names(fact), (fact.attributes or {}).get("identity_text") or ""]).lower()
    return all(ingredient.lower() in named for ingredient in extra)


UNIDENTIFIED_PACK = "the recalled lot, on a pack whose product we cannot identify (its NDC is not one the recall lists)"


def explain(fact, dispensing) -> Found | None:
    """Does this recall fact apply to this dispensing, how surely, and by which rule. The package
    decides first (the NDC product and the canonical lot); names only corroborate, or propose
    candidates when there is no NDC to compare."""
    if not recall_terms.is_recall(fact):
        return None
    products = recall_terms.products(fact)  # every product the record lists (text and openFDA block)
    product = dispensing_product(dispensing)
    same_product = bool(product) and product in recall_terms.named_products(fact)
    listed_only = bool(product) and product in products and not same_product
    other_product = bool(product) and bool(products) and product not in products
    # The pack's NDC has the digits of one the recall lists, read in another layout ("55111-123-90" typed as
    # 5-4-1, "55111-1239-0"): a typing slip, so the product may be the recalled one.
    twin = other_product and bool(ten_digit_forms(getattr(dispensing, "ndc", "") or "") & {
        form for listed in recall_terms.package_ndcs(fact) for form in ten_digit_forms(listed)})
    # Another product of a labeler the recall lists (Benicar against a Benicar HCT recall, Mylan's metoprolol
    # tartrate against its succinate): a labeler's product code names one product, and lots are unique only
    # within a product, so the same lot string on it is another lot. Not a repackaged pack ("another
    # labeler's NDC" below), whose labeler the recall does not list.
    sibling = other_product and not twin and product[:5] in {listed[:5] for listed in products}
    if twin:  # read below as a product the recall lists: never confirmed
        listed_only, other_product = True, False
    drug = getattr(dispensing, "drug", "") or ""
    drug_is_product = is_product_key(drug)
    same_drug = bool(fact.subject) and fact.subject == drug and not drug_is_product
    # A product the vocabulary cannot name (kept as its text, drugs.identity.product_key): the texts must agree.
    same_text = _texts_agree(fact, drug)
    shared = _shared_ingredient(fact, drug)
    plausible = listed_only or (same_drug and not other_product)  # not confirmed, not ruled out
    if fact.lot and not recall_terms.is_drug_level(fact) and sibling:
        return None
    if fact.lot and not recall_terms.is_drug_level(fact):
        if not lot_known(dispensing):
            if same_product or plausible or (same_text and not other_product):
                return Found(MatchClass.CANDIDATE, "same product, lot not recorded")
            return None
        exact, near = _near_rule(fact, dispensing)
        # A lot field that could not be read cleanly (drugs.lot_field) may hold the recalled lot as one of
        # its parts: never "not this lot", never more than probable, and only for the same product.
        inside = not exact and canonical_lot(fact.lot) in (getattr(dispensing, "lot_alternatives", None) or ())
        if not exact and near is None and not inside:
            return None
        if twin:
            how = "same lot" if exact else f"lot near miss: {near}" if near else "the recalled lot inside the lot field"
            return Found(MatchClass.PROBABLE, f"the pack's NDC has the digits of one the recall lists, in another "
                                              f"layout (a typing slip?); {how}")
        if exact and same_product:
            return Found(MatchClass.CONFIRMED, "NDC product named by the recall, same lot")
        if exact and listed_only:
            return Found(MatchClass.PROBABLE, "NDC product listed for the recall by openFDA, same lot")
        if exact and same_drug and other_product:
            return Found(MatchClass.PROBABLE, "same ingredients and lot, another labeler's NDC (repackaged?)")
        if exact and same_drug:
            return Found(MatchClass.PROBABLE, "same ingredients and lot (no NDC to compare)")
        if exact and same_text and not other_product:
            return Found(MatchClass.PROBABLE, "same product name and lot")
        if exact and same_text:
            return Found(MatchClass.PROBABLE, "same product name and lot, another labeler's NDC (repackaged?)")
        if exact and shared and not other_product:
            return Found(MatchClass.PROBABLE, "shares an ingredient with the recalled product, same lot")
        if exact and shared:
            return Found(MatchClass.PROBABLE, "shares an ingredient with the recalled product, same lot, another "
                                              "labeler's NDC (repackaged?)")
        # Under another labeler's NDC a part of the field that reads as a date ("TX4455 191223": an expiry) is
        # not taken for the recalled lot: another maker's pack, its ingredient and a date are not the lot.
        dated = other_product and is_date_shaped(fact.lot)
        if inside and not dated and (same_product or listed_only or same_drug or same_text or shared):
            return Found(MatchClass.PROBABLE, f"the recalled lot {printed_lot(fact.lot)} is written inside the lot "
                                              f"field as recorded ({dispensing.lot})")
        if near and (same_product or listed_only):
            return Found(MatchClass.PROBABLE, f"same NDC product, lot near miss: {near}")
        if near and same_drug and not other_product:
            return Found(MatchClass.PROBABLE, f"same ingredients, lot near miss: {near}")
        if near and same_drug:
            return Found(MatchClass.PROBABLE, f"same ingredients, lot near miss, another labeler's NDC (repackaged?): "
                                              f"{near}")
        if near and shared and not other_product:  # a near miss, one ingredient and another NDC: too little
            return Found(MatchClass.PROBABLE, f"shares an ingredient with the recalled product, lot near miss: {near}")
        if (exact or inside) and drug_is_product and other_product:
            # A name the vocabulary cannot read and an NDC the recall does not list: whether the pack is the
            # recalled product cannot be told (a repackager's own NDC and till name, "VALS 160MG TAB"). A lot
            # never matches on its own, so no more than a candidate for the pharmacist (ask.rules answers
            # "caution", never "safe").
            return Found(MatchClass.CANDIDATE, UNIDENTIFIED_PACK)
        return None
    if not within_lot_scope(fact, dispensing):
        return None
    if same_product:
        return Found(MatchClass.PRODUCT_ALL_LOTS, "NDC product named by an all-lots recall")
    if plausible:
        return Found(MatchClass.CANDIDATE, "same ingredients, the recall covers all lots")
    if same_text and not other_product:
        return Found(MatchClass.CANDIDATE, "same product name, the recall covers all lots")
    return None


def match(fact, dispensing) -> MatchClass | None:
    found = explain(fact, dispensing)
    return found.klass if found else None
