"""Scopes: the join keys between what a fact can touch and what a decision rests on.

A recall or label fact stores the scopes it touches (`Fact.scopes`); a decision stores, as premises,
the scopes of the patient's dispensing of the drug it decided about. A fact asserted later that
shares a scope with a standing decision's premise is a reason to re-decide it (docs/reasoning.md).
Sharing a scope is necessary for a fact to apply, not sufficient: premises may over-trigger (a
reaffirmation costs a re-decision), never under-trigger (a missed patient is told "safe").

Lots are unique only within a manufacturer's product, so a drug or product scope carries the lot;
the one lot-only scope, `lot:~<near key>` (drugs.lots.near_lot_key), exists so that a recall lot finds
every decision whose dispensing has that lot or a near miss of it whatever the names say (a repackaged
pack, a product the vocabulary cannot name, a lot typed with a zero for an O). It only triggers a
re-decision; drugs.matching decides whether the recall applies. Lots in scopes are canonical
(drugs.lots.canonical_lot), on both sides.

A product the vocabulary cannot name is keyed by its text (drugs.identity.product_key), which a recall
of it rarely shares (its subject may be an ingredient; its text another wording). So a recall also
carries `name:<word>` scopes, the first distinctive naming word of each product name it prints, and a
dispensing keyed by its product text rests on the first distinctive word of that text: at the drug
level for an all-lots recall, and at ANY_LOT for a recall of some lots and a pack whose lot was not
recorded. drugs.matching compares the texts (drugs.identity.texts_agree).
"""

from .identity import distinctive_first_word, is_product_key
from .lots import canonical_lot, near_lot_key, near_lot_keys

DRUG_LEVEL = "*"
# Carried by every lot-level fact and rested on by a dispensing whose lot was not recorded: a recall
# of *some* lot of the drug is exactly what such a patient must hear about (as a candidate).
ANY_LOT = "?"


NEAR_LOT = "lot:~"
NAME = "name:"


def _lot_part(lot) -> str:
    return canonical_lot(lot) if lot else DRUG_LEVEL


def name_words(texts) -> list[str]:
    """The first distinctive naming word of each product text or key (drugs.identity), sorted, unique."""
    return sorted({distinctive_first_word(text) for text in texts if text} - {""})


def fact_scopes(subject: str, lot: str | None, ndc_products=(), names=()) -> list[str]:
    """Scopes of a fact: (drug identity, lot) and (NDC product, lot) for each product it names;
    drug-level facts (no lot: "all lots", no lot named, labels) use the drug-level marker. `names`: the
    product texts it prints (recall_terms.product_names), as `name:` scopes (module docstring)."""
    part = _lot_part(lot)
    keys = ([f"drug:{subject}"] if subject else []) + [
        f"ndc:{product}" for product in sorted(set(ndc_products or ())) if product]
    scopes = [f"{key}|{part}" for key in keys]
    words = name_words([*names, subject] if is_product_key(subject) else names)
    if lot:
        scopes.extend(f"{key}|{ANY_LOT}" for key in keys)
        scopes.extend(f"{NEAR_LOT}{near}" for near in sorted(near_lot_keys(lot)))
        scopes.extend(f"{NAME}{word}|{ANY_LOT}" for word in words)
    else:
        scopes.extend(f"{NAME}{word}|{DRUG_LEVEL}" for word in words)
    return scopes


def dispensing_scopes(drug: str, lot: str | None, ndc_product: str | None = None, alternatives=()) -> list[str]:
    """Every scope a fact about this dispensing could carry: its lot and the drug level, by drug
    identity and by NDC product when known. An unknown lot rests on the drug level and on every
    lot-level fact of the drug or product (ANY_LOT). A lot field that could not be read cleanly rests
    on the near key of every other lot it may mean (drugs.lot_field), so a recall of one of them
    reaches the decision."""
    scopes = []
    lot = canonical_lot(lot) if lot else ""
    for prefix, value in (("drug", drug), ("ndc", ndc_product)):
        if not value:
            continue
        scopes.append(f"{prefix}:{value}|{DRUG_LEVEL}")
        scopes.append(f"{prefix}:{value}|{lot if lot else ANY_LOT}")
    if lot:
        scopes.append(f"{NEAR_LOT}{near_lot_key(lot)}")
        scopes.extend(sorted({f"{NEAR_LOT}{near_lot_key(other)}" for other in alternatives or ()} - set(scopes)))
    if is_product_key(drug) and (word := distinctive_first_word(drug)):
        scopes.append(f"{NAME}{word}|{DRUG_LEVEL}")
        if not lot:
            scopes.append(f"{NAME}{word}|{ANY_LOT}")
    return scopes


def claim_ndc_products(attributes) -> list[str]:
    """NDC products ('00378-5814') a fact names: `ndc_products` when ingestion computed them, else
    the labeler-product part of its `ndcs` (package 5-4-2 or product 5-4 forms)."""
    attributes = attributes or {}
    listed = attributes.get("ndc_products")
    if listed is None:
        listed = attributes.get("ndcs") or []
    products = set()
    for value in listed:
        if isinstance(value, str) and len(value) >= 10 and value[5] == "-" and value[:5].isdigit() \
                and value[6:10].isdigit():
            products.add(value[:10])
    return sorted(products)
