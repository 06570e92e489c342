"""How sure a correction's match is, as the worklist names it: the class a Correction carries, or the
nearest class for rows drafted before it carried one, in Python and in SQL."""


from django.db.models import Case, CharField, F, Q, Value, When

from corrections.models import Correction

# drugs.matching names how sure a match is. Until Correction carries its own
# `match_class`, the sweep's Correction.match maps onto the nearest class: a (drug, lot) match is
# "probable" (ingredients + lot; "confirmed" needs the NDC product too), a drug-only match is a
# "candidate". When the field exists it is used as is, in Python and in SQL.
MATCH_CLASSES = ["confirmed", "probable", "product_all_lots", "candidate"]
LEGACY_MATCH_CLASS = {Correction.Match.LOT: "probable", Correction.Match.DRUG: "candidate",
                      Correction.Match.ASKED: "asked", "lot": "probable", "drug": "candidate"}


def has_match_class_field() -> bool:
    return any(f.name == "match_class" for f in Correction._meta.get_fields())


def match_class_of(obj) -> str:
    """'confirmed' / 'probable' / 'product_all_lots' / 'candidate' / 'asked' for a Correction or Exposure."""
    value = getattr(obj, "match_class", None)
    if value:
        return str(getattr(value, "value", value))
    return LEGACY_MATCH_CLASS.get(getattr(obj, "match", ""), "candidate")


def match_class_sql():
    """The correction's match class in SQL: `match_class` when the sweep recorded one, else the
    legacy mapping of `match` (rows drafted before drugs.matching carry it blank)."""
    legacy = [When(match=k, then=Value(v)) for k, v in
              ((Correction.Match.LOT, "probable"), (Correction.Match.ASKED, "asked"))]
    if has_match_class_field():
        return Case(When(~Q(match_class=""), then=F("match_class")), *legacy, default=Value("candidate"),
                    output_field=CharField())
    return Case(*legacy, default=Value("candidate"), output_field=CharField())


def correction_match_class(match_class: str, match: str) -> str:
    """Python twin of match_class_sql() for a correction read as columns."""
    return match_class or LEGACY_MATCH_CLASS.get(match, "candidate")
