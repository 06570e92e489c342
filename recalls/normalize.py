"""Normalisation shared by recalls and dispensing so matching is exact and explainable.

A dispensing record's lot and a recall's lot are compared only after both pass through
`normalize_lot`; drug names through `normalize_drug_name`; NDCs through `normalize_ndc`.
"""

import re

_LOT_PREFIX = re.compile(r"^(?:LOT|LOTS|BATCH)\s*(?:NO\.?|NUMBER|NUMBERS|#|:)*\s*", re.IGNORECASE)


def normalize_lot(raw: str) -> str:
    """'Lot # b70130 ' -> 'B70130'; keeps hyphens inside lots ('22165-003'), drops spaces and stray punctuation."""
    if raw is None:
        return ""
    text = _LOT_PREFIX.sub("", str(raw).strip())
    text = re.sub(r"\s+", "", text.upper())
    text = re.sub(r"[^A-Z0-9\-/.]", "", text)
    return text.strip("-/.")


def normalize_ndc(raw: str) -> str:
    """Normalise a package NDC to the 11-digit 5-4-2 form.

    Accepts hyphenated 10-digit forms (4-4-2, 5-3-2, 5-4-1), the 5-4-2 form, or 11 bare digits.
    Raises ValueError with a readable reason for anything else (a bare 10-digit number is
    ambiguous: we cannot know which segment to pad).
    """
    text = (raw or "").strip()
    parts = text.split("-")
    if len(parts) == 3 and all(p.isdigit() for p in parts):
        a, b, c = (len(p) for p in parts)
        if (a, b, c) == (5, 4, 2):
            return text
        if (a, b, c) == (4, 4, 2):
            return f"0{parts[0]}-{parts[1]}-{parts[2]}"
        if (a, b, c) == (5, 3, 2):
            return f"{parts[0]}-0{parts[1]}-{parts[2]}"
        if (a, b, c) == (5, 4, 1):
            return f"{parts[0]}-{parts[1]}-0{parts[2]}"
    elif len(parts) == 1 and text.isdigit() and len(text) == 11:
        return f"{text[:5]}-{text[5:9]}-{text[9:]}"
    raise ValueError(
        f"{raw!r} is not an NDC: expected 10 digits hyphenated as 4-4-2, 5-3-2 or 5-4-1, or 11 digits (5-4-2)."
    )


def normalize_product_ndc(raw: str) -> str:
    """Labeler-product code (no package segment), e.g. openFDA's product_ndc '0378-1234' -> '00378-1234'."""
    parts = (raw or "").strip().split("-")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{raw!r} is not a product NDC (labeler-product).")
    a, b = parts
    if (len(a), len(b)) == (4, 4):
        return f"0{a}-{b}"
    if (len(a), len(b)) == (5, 3):
        return f"{a}-0{b}"
    if (len(a), len(b)) == (5, 4):
        return f"{a}-{b}"
    raise ValueError(f"{raw!r} is not a product NDC (labeler-product).")


def ndc_products(ndcs) -> set[str]:
    """Labeler-product codes ('00378-5814') of a list of package or product NDCs; unreadable entries
    are skipped. Drug-level recalls are narrowed by these, in exposure and in the reasoner alike."""
    products = set()
    for raw in ndcs or []:
        for normalise in (lambda v: normalize_ndc(v)[:10], normalize_product_ndc):
            try:
                products.add(normalise(str(raw)))
                break
            except ValueError:
                continue
    return products


_DOSAGE_WORDS = re.compile(
    r"\b(tablets?|capsules?|caplets?|usp|injection|injectable|oral|solution|suspension|film[- ]coated|"
    r"extended[- ]release|delayed[- ]release|er|xr|sr|hcl|rx only|mg|mcg|ml|g|for|and)\b",
    re.IGNORECASE,
)


def normalize_drug_name(raw: str) -> str:
    """'VALSARTAN Tablets USP, 320 mg' -> 'valsartan'; 'Valsartan and Hydrochlorothiazide' ->
    'valsartan hydrochlorothiazide'. Strength, dosage form and punctuation are dropped so the
    pharmacy's description and FDA's generic name meet on the same string."""
    if not raw:
        return ""
    # The first comma-separated clause, but "2,3-Dimercapto..." keeps its locant commas.
    text = re.split(r"(?<!\d),|,(?!\d)", str(raw))[0]
    text = re.sub(r"\([^)]*\)", " ", text)
    text = re.sub(r"\d+(\.\d+)?\s*(mg|mcg|ml|g|%|iu|units?)?(/\S+)?", " ", text, flags=re.IGNORECASE)
    text = _DOSAGE_WORDS.sub(" ", text)
    text = re.sub(r"[^a-zA-Z\s\-]", " ", text)
    words = text.lower().replace("-", " ").split()
    # FDA names the salt ("MONTELUKAST SODIUM") where a pharmacy often doesn't, or the other way
    # round; a mismatch would silently miss a patient. Drop a salt word that follows an active
    # moiety, but keep salts that are the drug itself ("magnesium sulfate", "potassium chloride").
    kept = []
    for word in words:
        if word in _SALT_WORDS and kept and kept[-1] not in _SALT_WORDS:
            continue
        kept.append(word)
    return " ".join(kept)


_SALT_WORDS = frozenset(
    "sodium potassium calcium magnesium hydrochloride hydrobromide dihydrochloride monohydrate dihydrate "
    "trihydrate anhydrous besylate besilate maleate mesylate succinate tartrate bitartrate citrate sulfate "
    "phosphate acetate fumarate hemifumarate bromide chloride medoxomil axetil cilexetil tosylate "
    "hyclate malate lactate gluconate".split()
)
