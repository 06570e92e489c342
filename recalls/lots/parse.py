"""What an openFDA recall covers, read from its free-text `code_info` (+ `more_code_info`).

`parse_scope(code_info, more_code_info="") -> LotScope` returns one of three scope kinds:

- ``lots``: the lots the text names, each with the expiry written next to it (ISO ``YYYY-MM`` or
  ``YYYY-MM-DD``, or None);
- ``all_lots``: every lot of the product (the text says so, or names no lot at all: we over-notify);
- ``all_lots_window``: every lot within a window: an expiry window ("all lots within expiry",
  "expiration dates between A and B"), a dispensing/distribution window ("all lots distributed
  between A and B", compounding pharmacies) or a manufacturing window ("compounded between A and B").
  Lots the text lists as examples are kept, but the scope is the window, never the lot strings.

plus ``truncated`` (openFDA cut `code_info` at ~32,600 characters) and ``uncertain`` (lots we could not
read whole: the lot at a cut, a lot split by openFDA's re-wrap every 4,000 characters).

How: (1) the two fields are joined the way openFDA split them; re-wrap spaces are taken out where the
joined token is the one the rest of the text uses; (2) compounding lots written as date + time + code
(``4/26/18 0520 22110P``) are lifted out whole; (3) every written date is masked as one DATE token
(``Exp 10/31/2022``, ``EXP01JUL2015``, ``BUD 06/08/14``, ``exp. date 08 2020``, ``MFD: 03.07.2016``,
``29-Dec-19``, ``December 24-31, 2022``, ranges), so no date or date fragment can become a lot;
(4) the rest is walked as tokens by a small mode machine (lot keyword -> collecting; Rx/SKU/serial/
service code/part/product code -> ignoring; NDC/UPC/CAS -> swallowing the numbers that follow) that
also attaches each DATE after an expiry word, or directly after a lot, to the lots before it.
Measured on a hand-labelled evaluation split never used to write it: see docs/lots.md.
"""


from __future__ import annotations

import re

from drugs.dates import DATE_RANGE_GLUE, GLUED_EXPIRY, MONTH_NUMBERS, mask_dates
from drugs.lot_field import is_date_shaped
from drugs.lots import printed_lot

from .openfda_text import SEAM, join_fields, unwrap
from .scope import LotScope, ScopedLot
from .windows import ALL_LOTS, LOT_DATE_RANGE, window_of, written_windows

_TOKEN = re.compile(
    r"\x01\d+\x02"                     # a masked date
    r"|\x03\d+\x04"                    # a lifted composite lot
    rf"|[A-Za-z0-9%{SEAM}]+(?:[-@_:+/.][A-Za-z0-9%{SEAM}]+)*"
    r"|[#;,:()\[\]&\-]"
)


_COMPOSITE_LOT = re.compile(r"(?<![\w/])(\d{1,2}/\d{1,2}/\d{2})\s+(\d{4})\s+((?:\d{1,3}-)?\d{5}[A-Z])\b")


_NDC_SHAPE = re.compile(r"^\d{4,5}-\d{3,4}-(?:\d{1,2}|[Xx*]{1,2})$")


# 5/31/2/023, 10/3102/17 (dates typed wrong), 1/2, 250/30, 10/80 (fractions, strengths): never lots
_NUMERIC_DATEISH = re.compile(r"^(?:\d{1,2}(?:[/.]\s?\d{1,4}){1,3}|\d{1,3}/\d{1,3})$")


_UNIT_SEGMENT = re.compile(r"^\d{0,4}(?:\.\d+)?(mg|mcg|ml|g|gm|kg|oz|lb|l|ct|cc|iu|meq|%)$", re.I)


_YEAR = re.compile(r"^(19|20)\d\d$")


_UNITS = {"mg", "mcg", "ml", "g", "gm", "kg", "oz", "lb", "lbs", "l", "ct", "cc", "iu", "meq", "count", "counts",
          "tablet", "tablets", "tab", "tabs", "capsule", "capsules", "caps", "caplet", "caplets", "pill", "pills",
          "bottle", "bottles", "vial", "vials", "bag", "bags", "carton", "cartons", "case", "cases", "pack",
          "packs", "packets", "units", "unit", "billion", "million", "x", "syringes", "syringe", "ampules",
          "tubes", "tube", "patches", "doses", "dose", "boxes", "box", "each", "pouches", "kits", "mm", "cm",
          "%", "percent", "day", "days", "hour", "hours", "gallon", "gallons", "liter", "liters", "pk",
          "softgels", "gummies", "ea", "pcs", "pieces", "sachets", "lozenges", "wipes", "packettes", "metered",
          "inhalations", "actuations",
          "sprays", "servings", "drops"}


_LOT_WORDS = {"lot", "lots", "lotno", "lot#", "lot#s", "lots#", "batch", "batches", "pedigree", "pedigrees"}


_CONSUMING_WORDS = {"ndc", "ndcs", "upc", "upcs", "nda", "anda", "gtin", "ean", "din", "cas", "ndc#", "upc#"}


_STICKY_OTHER_WORDS = {"rx", "rxs", "rx#", "sku", "skus", "sku#", "stock", "catalog", "catalogue", "cat", "model",
                       "serial", "s/n", "s/n's", "sn", "invoice", "order", "po", "ref", "item", "items", "style",
                       "disp", "upn", "reorder", "prescription", "prescriptions"}


# Other-code words only when followed by one of these (so "all lots of product distributed" stays a lot context).
_QUALIFIED_OTHER_WORDS = {"product", "service", "pack", "package", "material", "part", "customer", "kit", "case",
                          "device", "catalog", "display", "unit", "carton", "tray", "set"}


_QUALIFIERS = {"code", "codes", "number", "numbers", "no", "nos", "#", "id", "num", "#s", "#'s"}


_EXPIRY_WORDS = {"exp", "expiry", "expiration", "expires", "expiring", "expiry:", "bud", "use-by", "discard"}


_NOT_EXPIRY_DATE_WORDS = {"mfd", "mfg", "dom", "made", "manufactured", "manufacture", "compounding", "compounded",
                          "date",
                          "prepared", "shipped", "distributed", "dispensed", "filled", "sold", "packaged",
                          "since", "between", "from", "received", "on"}


_RANGE_WORDS = {"thru", "through", "to"}


_MONTH_WORDS = {m.upper() for m in MONTH_NUMBERS}


_DATE_RANGE_WORDS = {"-", "to", "through", "thru", "and", "until"}


# Upper-case words that are never lots, even next to a lot keyword.
_STOP_LETTERS = {m.upper() for m in ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "sept", "oct",
                                     "nov", "dec", "june", "july")} | {
                 "AND", "OR", "EXP", "LOT", "LOTS", "NDC", "UPC", "THE", "ALL", "NO", "NA", "NONE", "UNKNOWN",
                 "SEE", "BELOW", "ABOVE", "ONLY", "CODE", "CODES", "NUMBER", "NUMBERS", "USP", "USA", "BUD", "FOR",
                 "OF", "IN", "TO", "ON", "AT", "BY", "WITH", "DATE", "DATES", "EXPIRY", "BATCH", "NOT", "ANY",
                 "PER", "PFS", "IV", "IM", "SC", "OTC", "RX", "SKU", "KIT", "VIAL", "BAG", "BOX", "CT", "MG", "ML",
                 "USE", "BEST", "BEFORE", "AFTER", "SIZE", "TUBE", "CASE", "LABEL", "LABELS", "PACK", "EACH",
                 "ITEM", "ITEMS", "PART", "STYLE", "SERIAL", "MFD", "MFG", "LOTE", "NOS", "ALSO", "INCLUDING",
                 "THRU", "THROUGH", "EXPO", "DOM", "CPD", "FROM", "BETWEEN", "N/A", "TBD", "NPR", "CARTON", "DISPLAY",
                 "PATCH", "UNIT"}


def _prepare(text: str) -> str:
    text = text.replace("\u00a0", " ")
    text = re.sub(r"(?i)\b(lots?|batch)(?=\d)", r"\1 ", text)                 # "Lots15952"
    text = re.sub(r"(?i)\b(between|from|through|thru)(?=\d)", r"\1 ", text)   # "expiry between10/2020-07/2023"
    text = re.sub(r"(?i)-(exp|bud)\b", r" \1", text)                          # "12CQ005-Exp. 02/14", "722995-exp 07/22"
    text = re.sub(r"(?i)(?<=\d)[-.]?(exp|bud)(?=\b|\d|\.)", r" \1", text)       # "T000651exp 3/2022", "729522-exp12/23"
    text = re.sub(r"(?<=[A-Za-z0-9]):(?=\d{1,2}/\d{2,4}\b)", " ", text)         # "0804.182B-1:07/14": lot, expiry
    text = re.sub(r"(?i)\b(lots?|batch|exp|ndc|upc|bud|rx)\s*[#:]", r"\1 # ", text)  # "Lot#:123", "NDC:..."
    text = GLUED_EXPIRY.sub(r"\1 ", text)
    text = re.sub(r"(?<![\w,])\d{1,3}(?:,\d{3})+(?![\w,])", " ", text)  # quantities: 70,200
    # Compounding lots typed with a stray space: "01052016:    06@43", "01132016:74 @17".
    if "@" in text:
        text = re.sub(r"(\d{6,8}):\s+(\d{1,3}\s?@\d+)", r"\1:\2", text)
        text = re.sub(r"(\d{6,8}:\d{1,3})\s+@(\d+)", r"\1@\2", text)
    text = DATE_RANGE_GLUE.sub(r"\1 - ", text)
    return text


def _is_number_then_unit(token: str, following: str) -> bool:
    if not token.replace(".", "").replace(",", "").isdigit():
        return False
    head = following.split("/")[0].rstrip(":.")
    return head in _UNITS or bool(_UNIT_SEGMENT.match(head))


def _lot_shaped(token: str, *, implicit: bool, right_after_keyword: bool) -> bool:
    if not any(ch.isdigit() for ch in token):
        return False
    if _NDC_SHAPE.match(token) or _NUMERIC_DATEISH.match(token) or "%" in token:
        return False
    if re.fullmatch(r"\d+\.\d+", token) and implicit:  # decimals: 0.5, 12.5
        return False
    segments = re.split(r"[-/]", token)
    for segment in segments:
        if _UNIT_SEGMENT.match(segment):
            return False
        # A spelled-out word inside a hyphenated token (L-Glutathione-200-30) is a product name, not a lot.
        # (an upper-case group of four letters is a lot prefix: HACS-1, GLGL-1)
        if len(segments) > 1 and segment.isalpha() and len(segment) >= 4 and not (
                segment.isupper() and len(segment) == 4):
            return False
    if token.isdigit():
        if len(token) < (4 if implicit else (2 if right_after_keyword else 3)):
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


def _dated(part: str) -> bool:
    return is_date_shaped(part) or bool(re.fullmatch(r"\d{1,2}-\d{2,4}", part))


def _pair_part(part: str) -> bool:
    """One side of a kit's lot pair ("9L7003A/1803607"): four or more letters and digits with a digit, not a
    date written as digits ("1234567/20150601", "3069020/052019", "AB1234/12-2020") or a date word ("Exp.
    Date12/2022"), not a strength ("@14/1.25")."""
    key = re.sub(r"[^A-Z0-9]", "", part)
    return len(key) >= 4 and any(ch.isdigit() for ch in key) and not _dated(part) and not re.match(r"(?:DATE|EXP)", key)


def _hyphen_range(first: str, last: str) -> list[str] | None:
    """Two lots joined by a hyphen that read as a range ("022212001-022212008", D-391-2014): the same
    length, at least five characters each, all but one number shared and that number rising by at most 100.
    A hyphen also joins the parts of one lot ("22165-003", "4L67-C035"), which this shape leaves out."""
    if len(first) < 5 or len(first) != len(last):
        return None
    return _expand_range(first, last)


def parse_scope(code_info: str, more_code_info: str = "") -> LotScope:
    """The structured scope of a recall's code_info (+ more_code_info). Never raises on text."""
    code_info = str(code_info or "")
    more_code_info = str(more_code_info or "")
    text, truncated, cut_at_end = join_fields(code_info, more_code_info)
    text = unwrap(text)
    composites: list[str] = []

    def lift(match):
        composites.append(" ".join(match.groups()))
        return f" \x03{len(composites) - 1}\x04 "

    text = _COMPOSITE_LOT.sub(lift, _prepare(text))
    masked, dates = mask_dates(text)
    found, uncertain = _walk(masked, dates, composites, cut_at_end=cut_at_end)
    low = masked.lower()
    windows = written_windows(masked, dates, low)
    lot_range_match = LOT_DATE_RANGE.search(masked) if not found and "lot" in low else None
    says_all = "all" in low and bool(ALL_LOTS.search(masked))
    if lot_range_match and not found and not windows["manufactured_window"]:
        windows["manufactured_window"] = window_of(lot_range_match, dates)
    has_window = any(windows.values())
    if says_all:
        kind = "all_lots_window" if has_window else "all_lots"
    elif found:
        kind = "lots"
    elif has_window:
        kind = "all_lots_window"
    else:
        kind = "all_lots"
    if kind == "lots":
        windows = {"expiry_window": None, "dispensed_window": None, "manufactured_window": None}
    return LotScope(kind=kind, lots=found, truncated=truncated, uncertain=uncertain, says_all_lots=says_all,
                    **windows)


def _walk(masked: str, dates: list[str | None], composites: list[str], *, cut_at_end: bool):
    matches = list(_TOKEN.finditer(masked))
    tokens = [m.group() for m in matches]
    n = len(tokens)
    lowered = [t.lower().rstrip(".") for t in tokens]
    letter_date_pairs = sum(1 for i in range(n - 1) if tokens[i].isalpha() and tokens[i].isupper()
                            and 3 <= len(tokens[i]) <= 4 and tokens[i + 1].startswith("\x01")
                            and tokens[i] not in _STOP_LETTERS)
    text_end = len(masked.rstrip())
    found: dict[str, ScopedLot] = {}
    order: list[str] = []
    uncertain: list[str] = []
    pending: list[str] = []  # lots still waiting for their expiry
    mode = "implicit"  # implicit | lot | other | consume
    resume = None
    expect = None  # "expiry" after an expiry word, "ignore" after a manufacture/distribution word
    expiry_word_in_group = False
    bracket = 0
    last_keyword_at = -10

    last_was_letters = False

    def add(raw: str, end: int):
        nonlocal pending, last_was_letters
        seam = SEAM in raw
        lot = printed_lot(raw.replace(SEAM, ""))
        if not lot:
            return
        if cut_at_end and end >= text_end:
            uncertain.append(raw.replace(SEAM, ""))  # the cut lot: flagged, never matched as a fragment
            return
        if seam:
            uncertain.append(lot)
        last_was_letters = bool(re.fullmatch(r"[A-Z]{3,6}(?:-\d{1,2})?", lot))
        if lot not in found:
            found[lot] = ScopedLot(lot)
            order.append(lot)
            pending.append(lot)
        parts = lot.split("/")
        if len(parts) == 3 and re.fullmatch(r"[A-Z]{1,2}", parts[2]):  # "401537AA/401537/A": 401537AA, 401537A
            parts = [parts[0], parts[1] + parts[2]]
        if len(parts) == 2 and all(_pair_part(part) for part in parts):
            # "Kit/Vial Lot #: (9L7003A/1803607)": a kit's two lots, each printed on its own component.
            for part in parts:
                add(part, end)
        elif len(parts) == 2 and _pair_part(parts[0]) and _dated(parts[1]):
            add(parts[0], end)  # "3069020/052019": the lot, then a date (its expiry)

    def assign(value: str | None):
        nonlocal pending
        for lot in pending:
            if found[lot].expiry is None and value:
                found[lot] = ScopedLot(lot, value)
        pending = []

    i = 0
    while i < n:
        token, word = tokens[i], lowered[i]
        following = lowered[i + 1] if i + 1 < n else ""
        end = matches[i].end()
        i += 1
        if token == "[":
            # "[30-count bottle]", "[46016]": a bracketed product number or pack, never a lot (a stray "["
            # with no "]" soon after is a typo and ignored).
            if "]" in tokens[i:i + 8]:
                bracket += 1
            continue
        if token == "]":
            bracket = max(0, bracket - 1)
            continue
        if bracket:
            continue
        if token.startswith("\x01"):  # a date
            value = dates[int(token[1:-1])]
            # A range (A - B, A to B) is a window or a span, never one lot's expiry.
            if following in _DATE_RANGE_WORDS and i + 1 < n and tokens[i + 1].startswith("\x01"):
                i += 2
                expect = None
                continue
            if i < n and tokens[i] == "-" and i + 1 < n and tokens[i + 1].startswith("\x01"):
                i += 2
                expect = None
                continue
            if expect == "ignore":
                expect = None
                continue
            if expect == "expiry" or pending:
                assign(value)
            expect = None
            continue
        if token in (";", "."):
            if expiry_word_in_group:
                pending = []
            expiry_word_in_group = False
            expect = None
            continue
        if token in (",", "(", ")", "&", "#", ":", "-"):
            continue
        if expect == "expiry" and re.fullmatch(r"\d+(?:[/.]\d+)+|\d{1,2}-\d{2}", token):
            expect = None  # a garbled expiry date ("Exp 122/17"), not a lot
            pending = []
            continue
        if token.startswith("\x03"):
            if mode in ("other", "consume"):
                continue
            add(composites[int(token[1:-1])], end)
            continue
        if word in _LOT_WORDS or (word == "control" and following in _QUALIFIERS):
            mode, resume = "lot", None
            last_keyword_at = i
            if expect == "expiry":  # "Lot and Exp Date: 0008777, ...": a column heading, lots follow
                expect = None
            continue
        if word in ("code", "codes", "number", "numbers", "no", "nos", "num", "id", "#s", "s") and \
                i - 1 == last_keyword_at:
            last_keyword_at = i
            continue
        if word in _EXPIRY_WORDS or (word in ("use", "best") and following in ("by", "before", "used")):
            expect = "expiry"
            expiry_word_in_group = True
            continue
        if word in _NOT_EXPIRY_DATE_WORDS:
            expect = "ignore" if word not in ("date",) or expect != "expiry" else expect
            continue
        if word in _STICKY_OTHER_WORDS or (word in _QUALIFIED_OTHER_WORDS and following in _QUALIFIERS):
            mode, resume = "other", None
            continue
        if word in _CONSUMING_WORDS:
            if mode != "consume":
                resume = mode
            mode = "consume"
            continue
        if mode == "consume":
            # Numeric parts of an NDC/UPC ("UPC 7 88521 13546 2") are swallowed; the first token with a letter ends it.
            if re.fullmatch(r"[\d\-]+", token) or _NDC_SHAPE.match(token) or not any(ch.isdigit() for ch in token):
                continue
            mode, resume = resume or "implicit", None
        if mode == "other":
            continue
        if _is_number_then_unit(token, following):
            i += 1
            continue
        right_after_keyword = i - 1 == last_keyword_at + 1 or (i - 1 == last_keyword_at)
        # Letters-only lot codes: "Lot #: RJM 10/19  RIA 09/19", "Lot # MGEC".
        if token.isalpha() and token.isupper() and token not in _STOP_LETTERS and 2 <= len(token) <= 6:
            next_token = tokens[i] if i < n else ""
            if next_token == ":":  # a label ("CPD: 01/02/2019"), not a lot
                continue
            if mode == "lot" or mode == "implicit":
                # A labeller/site word belongs to the lot after it: "GATCO 01671", "BJ 3340".
                if mode == "lot" and next_token.isdigit() and len(next_token) >= 2 and not _is_number_then_unit(
                        next_token, lowered[i + 1] if i + 1 < n else "") and token not in _MONTH_WORDS:
                    add(token + next_token, matches[i].end())
                    i += 1
                    continue
                if 3 <= len(token) <= 4 and next_token.startswith("\x01") and (mode == "lot" or letter_date_pairs >= 2):
                    add(token, end)
                    continue
                after_next = lowered[i + 1] if i + 1 < n else ""
                before = tokens[i - 2] if i >= 2 else ""
                starts_item = before in (",", ";", "#", ":") or lowered[i - 2] in _LOT_WORDS if i >= 2 else True
                if mode == "lot" and len(token) >= 3 and (
                        (right_after_keyword and (next_token in ("", ",", ";", ".") or next_token.startswith("\x01")))
                        or (next_token in (",", ";") and after_next in _EXPIRY_WORDS and starts_item)
                        or (next_token in ("", ",", ";", ".") and starts_item and last_was_letters)):
                    add(token, end)
                    continue
            continue
        if not _lot_shaped(token, implicit=(mode == "implicit"), right_after_keyword=right_after_keyword):
            continue
        lots = [token]
        if following in _RANGE_WORDS and i + 1 < n and _lot_shaped(tokens[i + 1], implicit=False,
                                                                      right_after_keyword=False):
            expanded = _expand_range(token, tokens[i + 1])
            if expanded:
                lots = expanded
                i += 2
        elif following == "-" and i + 1 < n and (expanded := _hyphen_range(token, tokens[i + 1])):
            lots = expanded  # "022212001- 022212008": a range, its ends included
            i += 2
        elif token.count("-") == 1 and (expanded := _hyphen_range(*token.split("-"))):
            lots = [token, *expanded]  # "022212010-022212012": a range, or one lot written so; both kept
        # "18B005 A and 18B005 B": a lone capital after a lot is part of it (not "a)" enumerations).
        dash = 1 if i + 1 < n and tokens[i] == "-" else 0  # "20130319 -J"
        if len(lots) == 1 and i + dash < n and len(tokens[i + dash]) == 1 and tokens[i + dash].isupper() and \
                tokens[i + dash].isalpha() and not (i + dash + 1 < n and tokens[i + dash + 1] == ")") and mode == "lot":
            lots = [token + tokens[i + dash]]
            i += 1 + dash
        for lot in lots:
            add(lot, matches[i - 1].end() if i - 1 < n else end)
    return [found[lot] for lot in order], uncertain


def extract_lots(code_info: str) -> list[str]:
    """Normalised lot numbers named in free text, in order of appearance, without duplicates."""
    return parse_scope(code_info).lot_numbers


def mentions_all_lots(code_info: str) -> bool:
    """True when the recall text says every lot (or every lot within a window) is recalled."""
    scope = parse_scope(code_info)
    return scope.says_all_lots or (scope.kind == "all_lots_window")
