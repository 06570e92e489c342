"""National Drug Codes: normalisation to 5-4-2, the product part, and NDCs written in recall text.

    normalize_ndc(raw) -> "00378-5814-77"          package NDC-11 (raises ValueError)
    normalize_product_ndc(raw) -> "00378-5814"     labeler-product (raises ValueError)
    ndc_product(ndc11) -> "00378-5814"             the product an NDC-11 belongs to ("" if not one)
    ndc_products(ndcs) -> {"00378-5814", ...}      products of package or product NDCs; unreadable skipped
    ndcs_in_text(text) -> ["00378-5814-77", ...]   validated package NDCs written in free text
    ten_digit_forms(ndc11) -> {"5511112390"}       the 10 printed digits an NDC-11 may have come from

A lot is unique only within a manufacturer's product, so the product is what a lot is read against.
FDA's 2026 rule moves NDCs to 12 digits (6-4-2) from 2033: keys are compared as strings, never by length.
"""

import re


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


_NDC11 = re.compile(r"^\d{5}-\d{4}-\d{2}$")


def ndc_product(ndc11: str) -> str:
    """'00378-5814-77' -> '00378-5814' (labeler + product); '' for anything that is not a 5-4-2 NDC."""
    return ndc11[:10] if ndc11 and _NDC11.match(ndc11) else ""


def ten_digit_forms(ndc11: str) -> set[str]:
    """The 10 digits printed on a pack an NDC-11 may have been read from, one per layout whose padding zero it
    has: '55111-0123-90' (5-3-2) -> {'5511112390'}. Two NDC-11s sharing a form are one printed code read in two
    layouts ('55111-123-90' typed as '55111-1239-0' is '55111-1239-00'): a typing slip, not another product."""
    if not ndc11 or not _NDC11.match(ndc11):
        return set()
    labeler, product, package = ndc11.split("-")
    forms = set()
    if labeler[0] == "0":
        forms.add(labeler[1:] + product + package)
    if product[0] == "0":
        forms.add(labeler + product[1:] + package)
    if package[0] == "0":
        forms.add(labeler + product + package[1:])
    return forms


def ndc_products(ndcs) -> set[str]:
    """Labeler-product codes ('00378-5814') of a list of package or product NDCs; unreadable entries
    are skipped."""
    products = set()
    for raw in ndcs or []:
        for normalise in (lambda v: normalize_ndc(v)[:10], normalize_product_ndc):
            try:
                products.add(normalise(str(raw)))
                break
            except ValueError:
                continue
    return products


# Hyphenated NDC-10/11 shapes, or 11 bare digits after an "NDC" word. A bare 10- or 11-digit number
# elsewhere is a UPC, a phone number or a batch as often as an NDC (openFDA's own regex takes them:
# docs/drug-identity.md), so it is not read as one.
_HYPHENATED = re.compile(r"(?<![\d-])(\d{4,5})\s?-\s?(\d{3,4})\s?-\s?(\d{1,2})(?![\d-])")
_BARE_AFTER_WORD = re.compile(r"\bNDCs?\s*(?:#|No\.?|number)?\s*:?\s*(\d{11})(?!\d)", re.IGNORECASE)


def ndcs_in_text(text: str) -> list[str]:
    """Package NDCs (5-4-2) written in free text such as product_description or code_info, validated
    (segment lengths must make 10 digits as 4-4-2, 5-3-2 or 5-4-1, or 11 as 5-4-2); sorted, unique."""
    found = set()
    for match in _HYPHENATED.finditer(text or ""):
        try:
            found.add(normalize_ndc("-".join(match.groups())))
        except ValueError:
            continue
    for match in _BARE_AFTER_WORD.finditer(text or ""):
        found.add(normalize_ndc(match.group(1)))
    return sorted(found)
