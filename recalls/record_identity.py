"""Which medicine an openFDA recall record is about: its NDCs, its product names and its identity key
(drugs.identity over openFDA's harmonised names and the record's own description), bounded to what a
fact's subject holds."""

from dataclasses import dataclass

from drugs.identity import PRODUCT_SOURCE, product_key, product_names, resolve
from drugs.ndc import ndcs_in_text, normalize_ndc, normalize_product_ndc

from .record_fields import text_items

TEXT_FIELDS = ("product_description", "code_info", "more_code_info")  # the record's own words


def ndcs_of(record: dict, *, trust_openfda: bool = True) -> list[str]:
    """NDCs a recall names: openfda.package_ndc (5-4-2) and product_ndc (5-4, where no package of that
    product is listed), plus validated NDCs written in product_description and code_info. Without
    `trust_openfda` (its block names another drug, see identity_of) only the record's own text counts."""
    openfda = (record.get("openfda") or {}) if trust_openfda else {}
    if not isinstance(openfda, dict):
        openfda = {}
    packages = set()
    for raw in text_items(openfda.get("package_ndc")):
        try:
            packages.add(normalize_ndc(raw))
        except ValueError:
            continue
    for name in TEXT_FIELDS:
        value = record.get(name)
        if isinstance(value, str):
            packages.update(ndcs_in_text(value))
    covered = {package[:10] for package in packages}
    products = set()
    for raw in text_items(openfda.get("product_ndc")):
        try:
            product = normalize_product_ndc(raw)
        except ValueError:
            continue
        if product not in covered:
            products.add(product)
    return sorted(packages | products)


# Bumped when the way a recall's identity (subject, NDCs, identity attributes) is derived changes: a
# record remembered under an older version is re-derived once, through normal versioning.
# 1: normalised description words; 2: drugs.identity vocabulary + NDCs from text; 3: a product the
# vocabulary cannot name, or with more ingredients than a subject holds, keeps its product text as identity.
IDENTITY_VERSION = 3


def product_names_of(record: dict) -> list[str]:
    """The product texts a recall prints, kept whole beside the ingredients its subject was reduced to
    (drugs.identity.product_names): its description, openFDA's brand and generic names."""
    openfda = record.get("openfda") if isinstance(record.get("openfda"), dict) else {}
    return product_names(text_items(record.get("product_description")) + text_items(openfda.get("brand_name"))
                         + text_items(openfda.get("generic_name")))


SUBJECT_MAX = 200  # memory.Fact.subject
LOT_MAX = 100  # memory.Fact.lot
IDENTITY_TEXT_MAX = 300


@dataclass
class RecallIdentity:
    subject: str          # identity key; a product text key (product:...) when no ingredient is named
    source: str           # "openfda.generic_name" | "product_description" | "unresolved"
    text: str             # the words that were resolved
    flag: str             # why a person should look ("" when nothing to say)
    trust_openfda: bool   # False when the openfda block names a different drug than the description

    def attributes(self) -> dict:
        attributes = {"identity_source": self.source, "identity_text": self.text[:IDENTITY_TEXT_MAX]}
        if self.flag:
            attributes["identity_flag"] = self.flag
        return attributes


def _generic_identity(record: dict):
    """The one identity openfda.generic_name gives, or None (absent, unresolved, or its names disagree)."""
    names = (record.get("openfda") or {}).get("generic_name") or []
    if not isinstance(names, list):
        return None
    keys = {resolve(name) for name in names if isinstance(name, str) and name.strip()}
    resolved = {identity for identity in keys if identity.resolved}
    if len({identity.key for identity in resolved}) != 1 or len(resolved) != len(keys):
        return None
    return next(iter(resolved))


def identity_of(record: dict) -> RecallIdentity:
    """Which medicine a recall is about.

    openfda.generic_name wins when it resolves: FDA's harmonised name from the listing names every active
    ingredient and no vehicle or flavour. But openFDA joins that block by NDCs it regexes out of the text,
    to current listings, and sometimes lands on another product (D-1110-2015: clarithromycin tablets whose
    block says captopril). So when the description resolves to ingredients sharing none with the block's,
    the description wins, the block's NDCs are not used, and the fact is flagged for a person. A record
    neither resolves is kept with subject "" (matched by NDC product and lot only) and flagged.
    """
    description = record.get("product_description") or ""
    from_description = resolve(description)
    from_generic = _generic_identity(record)
    disjoint = from_generic and not set(from_generic.ingredients) & set(from_description.ingredients)
    if disjoint and from_description.resolved:
        return RecallIdentity(
            from_description.key, "product_description", from_description.text,
            f"openfda.generic_name says {from_generic.key!r} but product_description says "
            f"{from_description.key!r}: the description is used and openFDA's NDCs for this record are ignored",
            trust_openfda=False)
    if from_generic:
        return RecallIdentity(from_generic.key, "openfda.generic_name", from_generic.text, "", True)
    if from_description.resolved:
        return RecallIdentity(from_description.key, "product_description", from_description.text, "", True)
    text_key = product_key(description)
    return RecallIdentity(text_key, PRODUCT_SOURCE if text_key else "unresolved", from_description.text,
                          "no drug the vocabulary knows is named in product_description or openfda.generic_name: "
                          "its product text is its identity (matched by NDC product and lot, or by that text "
                          "and the exact lot) until a person identifies it", True)


def bounded(identity: RecallIdentity, description: str) -> RecallIdentity:
    """An identity key too long for a fact's subject (a parenteral nutrition product names 20 ingredients)
    is replaced by its product text key, flagged: the record is kept, never refused for its length."""
    if len(identity.subject) <= SUBJECT_MAX:
        return identity
    return RecallIdentity(product_key(description)[:SUBJECT_MAX], PRODUCT_SOURCE, identity.text,
                          f"its ingredients ({len(identity.subject)} characters as a key) are more than a subject "
                          f"holds: the product text is its identity; the ingredients were {identity.subject[:300]}",
                          identity.trust_openfda)


def short_product(description: str, limit: int = 140) -> str:
    text = " ".join(description.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
