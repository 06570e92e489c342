"""Frozen copy of the lot extractor that read lot lists before recalls.lots.parse_scope (commit 209b04a),
for tests/recalls/test_recalls_lots_reingest.py only.

Lot numbers out of openFDA's free-text `code_info`.

`code_info` mixes lot numbers with expiry dates, NDCs, UPCs, prescription numbers, item codes
and pack sizes, in every layout a recalling firm ever typed. The extractor walks the text as
tokens with a small mode machine:

- a lot keyword (lot, lots, batch, pedigree, control no.) switches to *collecting*;
- a sticky "other code" keyword (Rx #, item, SKU, stock no., product/service/pack code) switches
  to *ignoring* until the next keyword;
- NDC / UPC / NDA keywords swallow the numeric tokens that follow them, then the previous mode resumes;
- before any keyword (plain lists such as "HF02318A 6/30/2020 HF02418A ...") lot-shaped tokens are
  collected, except bare years.

Whatever the mode, dates (numeric, month-name), NDC-shaped numbers, quantities with units and
fractions are never lots. Small "A thru B" ranges are expanded. Measured on 157 hand-labelled
strings: see docs/lots.md.
"""

import re

from drugs.lots import printed_lot

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
           "january", "february", "march", "april", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))

_UNITS = {"mg", "mcg", "ml", "g", "gm", "kg", "oz", "lb", "lbs", "l", "ct", "cc", "iu", "meq", "count", "counts",
          "tablet", "tablets", "tab", "tabs", "capsule", "capsules", "caps", "caplet", "caplets", "pill", "pills",
          "bottle", "bottles", "vial", "vials", "bag", "bags", "carton", "cartons", "case", "cases", "pack",
          "packs", "packets", "units", "unit", "billion", "million", "x", "syringes", "syringe", "ampules",
          "tubes", "tube", "patches", "doses", "dose", "boxes", "box", "each", "pouches", "kits", "mm", "cm",
          "%", "percent", "day", "days", "hour", "hours"}

# Tokens: alphanumeric runs joined by connectors that occur inside lot codes (45-110-C6, 04272015@82,
# AD46312_4, CABCAIBA:36, 06102019+52398, 7F92YUD3H1A/AIS1017B).
_TOKEN = re.compile(r"[A-Za-z0-9%]+(?:[-@_:+/.][A-Za-z0-9%]+)*")

_NDC_SHAPE = re.compile(r"^\d{4,5}-\d{3,4}-\d{1,2}$")
_DATE_SHAPES = [
    re.compile(r"^\d{1,2}[/-]\d{1,2}[/-]\d{2,4}$"),        # 8/31/2019, 03-1-16, 10/31/217 (sic)
    re.compile(r"^\d{1,2}[/-]\d{4}$"),                     # 05/2021, 02-2018
    re.compile(r"^\d{1,2}/\d{2}$"),                        # 09/19 (MM/YY)
    re.compile(r"^\d{4}[/-]\d{1,2}([/-]\d{1,2})?$"),       # 2021-05, 2021-05-31
    # 1MAR2020, 30-Jun-2020
    re.compile(rf"^(\d{{1,2}}[-/ ]?)?({_MONTH_RE})\.?[-/ ]?(\d{{1,2}}[-/ ,]?)?\d{{2,4}}$", re.I),
    re.compile(rf"^({_MONTH_RE})[-/]\d{{2,4}}$", re.I),     # Apr-2021
    re.compile(r"^\d+/\d+$"),                              # fractions, odd dates: 1/2, 8/19
    re.compile(r"^\d+\.\d+$"),                             # decimals: 0.5, 12.5
]
_UNIT_SEGMENT = re.compile(r"^\d{0,4}(?:\.\d+)?(mg|mcg|ml|g|gm|kg|oz|lb|l|ct|cc|iu|meq|%)$", re.I)
_YEAR = re.compile(r"^(19|20)\d\d$")

_LOT_WORDS = {"lot", "lots", "lotno", "lot#", "batch", "batches", "pedigree", "pedigrees"}
_CONSUMING_WORDS = {"ndc", "ndcs", "upc", "upcs", "nda", "anda", "gtin", "ean", "din"}
_STICKY_OTHER_WORDS = {"rx", "rxs", "sku", "skus", "stock", "catalog", "catalogue", "cat", "model", "serial",
                       "invoice", "order", "po", "ref.", "item", "items", "mfg"}
# Other-code words only when followed by one of these (so "all lots of product distributed" stays a lot context).
_QUALIFIED_OTHER_WORDS = {"product", "service", "pack", "package", "material", "part", "reorder", "customer"}
_QUALIFIERS = {"code", "codes", "number", "numbers", "no", "nos", "#", "id", "num"}
_RANGE_WORDS = {"thru", "through", "to"}

_ALL_LOTS = re.compile(
    r"\ball\s+(?:(?:of\s+the|the|unexpired|remaining|sterile|compounded|affected)\s+)*"
    r"(?:lots?|lot\s+(?:codes?|numbers?)|batch(?:es)?|products?|units|codes|product\s+lots)\b",
    re.I,
)


def mentions_all_lots(code_info: str) -> bool:
    """True when the recall text says every lot (or every product) is recalled."""
    return bool(_ALL_LOTS.search(code_info or ""))


def _is_date(token: str) -> bool:
    return any(shape.match(token) for shape in _DATE_SHAPES)


def _is_month(token: str) -> bool:
    return token.lower().rstrip(".") in _MONTHS


def _lot_shaped(token: str, *, implicit: bool) -> bool:
    if not any(ch.isdigit() for ch in token):
        return False
    if _is_date(token) or _NDC_SHAPE.match(token):
        return False
    if "%" in token:
        return False
    segments = re.split(r"[-/]", token)
    for segment in segments:
        if _UNIT_SEGMENT.match(segment):
            return False
        # A spelled-out word inside a hyphenated token (L-Glutathione-200-30) is a product name, not a lot.
        if len(segments) > 1 and segment.isalpha() and len(segment) >= 4:
            return False
    if token.isdigit():
        if len(token) < (4 if implicit else 3):
            return False
        if implicit and _YEAR.match(token):
            return False
    elif len(token) < 3:
        return False
    return True


def _expand_range(first: str, last: str, limit: int = 100) -> list[str] | None:
    """'H20-01S' .. 'H20-12S' -> the 12 codes; None unless both share everything but one number."""
    a_parts = re.split(r"(\d+)", first)
    b_parts = re.split(r"(\d+)", last)
    if len(a_parts) != len(b_parts):
        return None
    differing = [i for i, (x, y) in enumerate(zip(a_parts, b_parts, strict=True)) if x != y]
    if len(differing) != 1:
        return None
    i = differing[0]
    x, y = a_parts[i], b_parts[i]
    if not (x.isdigit() and y.isdigit()) or len(x) != len(y):
        return None
    lo, hi = int(x), int(y)
    if not (0 < hi - lo <= limit):
        return None
    return ["".join(a_parts[:i]) + str(n).zfill(len(x)) + "".join(a_parts[i + 1:]) for n in range(lo, hi + 1)]


def _prepare(text: str) -> str:
    text = re.sub(r"(?i)\b(lots?|batch)(?=\d)", r"\1 ", text)             # "Lots15952"
    text = re.sub(r"(?i)-(exp|bud)\b", r" \1", text)                      # "12CQ005-Exp. 02/14"
    text = re.sub(r"(?i)\b(lots?|batch|exp|ndc|upc|bud|rx)\s*[#:]", r"\1 ", text)  # "Lot#:123", "NDC:..."
    return text


def extract_lots(code_info: str) -> list[str]:
    """Normalised lot numbers named in free text, in order of appearance, without duplicates."""
    if not code_info:
        return []
    tokens = _TOKEN.findall(_prepare(str(code_info)))
    found: list[str] = []
    mode = "implicit"  # implicit | lot | other
    resume = None  # mode to return to after an NDC/UPC number
    skip_numbers_after_month = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        word = token.lower().rstrip(".")
        following = tokens[i + 1].lower().rstrip(".") if i + 1 < len(tokens) else ""
        i += 1
        if word in _LOT_WORDS or (word == "control" and following in _QUALIFIERS):
            mode, resume = "lot", None
            continue
        if word in _STICKY_OTHER_WORDS or (word in _QUALIFIED_OTHER_WORDS and following in _QUALIFIERS):
            mode, resume = "other", None
            continue
        if word in _CONSUMING_WORDS:
            if mode != "consume":
                resume = mode
            mode = "consume"
            continue
        if _is_month(token):
            skip_numbers_after_month = 2  # "May 7, 2013", "November 2014"
            continue
        if skip_numbers_after_month and token.isdigit() and len(token) <= 4:
            skip_numbers_after_month -= 1
            continue
        skip_numbers_after_month = 0
        if mode == "consume":
            # Numeric parts of an NDC/UPC ("UPC 7 88521 13546 2") are swallowed; the first token with a letter ends it.
            if re.fullmatch(r"[\d\-]+", token) or not any(ch.isdigit() for ch in token):
                continue
            mode, resume = resume or "implicit", None
        if mode == "other":
            continue
        # A number followed by a unit is a quantity ("100 count", "24 ct. carton").
        if token.replace(".", "").isdigit() and following in _UNITS:
            continue
        if not _lot_shaped(token, implicit=(mode == "implicit")):
            continue
        lots = [token]
        if following in _RANGE_WORDS and i + 1 < len(tokens) and _lot_shaped(tokens[i + 1], implicit=False):
            expanded = _expand_range(token, tokens[i + 1])
            if expanded:
                lots = expanded
                i += 2
        for lot in lots:
            normalised = printed_lot(lot)
            if normalised and normalised not in found:
                found.append(normalised)
    return found
