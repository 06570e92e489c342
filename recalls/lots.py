"""What an openFDA recall covers, read from its free-text `code_info` (+ `more_code_info`).

Why one long module: it is one grammar (tokens, lot shapes, expiry forms, window phrases) whose
rules read each other's state; split apart, each piece would need the others to be understood.

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
from collections import Counter
from dataclasses import dataclass, field

from drugs.lots import printed_lot

KINDS = ("lots", "all_lots", "all_lots_window")
LOT_SCOPE_VERSION = "3"  # part of recalls.ingest.record_hash: a parser change re-reads every record once
OPENFDA_CUT = 32600  # openFDA stores at most this many characters of code_info, the rest in more_code_info
TRUNCATED_AT = 30000  # a code_info this long was cut by openFDA
REWRAP_EVERY = 4000  # openFDA re-wraps long text, inserting a space about every 4,000 characters
_SEAM = "\u2063"  # marks where openFDA split a token; kept inside tokens, removed from lots

# --- dates ----------------------------------------------------------------------------------------

_MONTH_NUMBERS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4, "may": 5,
    "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9, "sept": 9, "september": 9,
    "oct": 10, "october": 10, "nov": 11, "november": 11, "dec": 12, "december": 12,
}
_MON = "(?:" + "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True)) + ")"
# A date never touches a lot character: 11-18-2016@70, t12-14-2016@99, 01-27-2020:93@21 are lots.
_L = r"(?<![A-Za-z0-9@+/\-_\u2063])(?<!\d:)"
_R = r"(?![A-Za-z0-9@+/\-_\u2063]|[.:]\d)"
_ML = r"(?<![A-Za-z])"  # month names: not inside a word
_MR = r"(?![a-z])"

_DATE_PATTERNS = [
    # December 24-31, 2022 / December 24- 30, 2022 (beyond-use ranges)
    ("mdd_y", re.compile(rf"{_ML}(?P<mon>{_MON})\.?\s*(?P<d>\d{{1,2}})\s*-\s*\d{{1,2}},?\s+(?P<y>\d{{4}}){_R}", re.I)),
    # December 01, 2019 / May 7, 2013
    ("md_y", re.compile(rf"{_ML}(?P<mon>{_MON})\.?\s*(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}}){_R}", re.I)),
    # 01 Oct 2016, 1OCT2014, 29-Dec-19, 30-Apr-2013, 21SEP2023, 31 JUL 2020
    ("d_mon_y", re.compile(rf"{_L}(?P<d>\d{{1,2}})[\s\-]?(?P<mon>{_MON})\.?[\s\-,]?(?P<y>\d{{4}}|\d{{2}}){_R}", re.I)),
    # 2019-DEC
    ("y_mon", re.compile(rf"{_L}(?P<y>\d{{4}})[\-/ ](?P<mon>{_MON}){_MR}", re.I)),
    # Dec 2014, June 2021, Aug. 2022, May: 2020, Jun-2019
    ("mon_y", re.compile(rf"{_ML}(?P<mon>{_MON})\.?[\s:,\-/]*(?P<y>\d{{4}}){_R}", re.I)),
    # 2021 OCT 31
    ("y_mon_d", re.compile(rf"{_L}(?P<y>\d{{4}})\s+(?P<mon>{_MON})\.?\s+(?P<d>\d{{1,2}}){_R}", re.I)),
    # Exp. DEC 21, JUL 21 (month and two-digit year)
    ("mon_sp_yy", re.compile(rf"{_ML}(?P<mon>{_MON})\.?\s+(?P<y>\d{{2}})(?![\d/\-:]){_R}", re.I)),
    # May-17, Jul-20
    ("mon_yy", re.compile(rf"{_ML}(?P<mon>{_MON})[\-/](?P<y>\d{{2}}){_R}", re.I)),
    # 2021-05-31, 2021/05
    ("iso", re.compile(rf"{_L}(?P<y>(?:19|20)\d\d)(?P<sep>[\-/.])(?P<m>\d{{1,2}})(?:(?P=sep)(?P<d>\d{{1,2}}))?{_R}")),
    # 10/31/2022, 03-1-16, 03.07.2016, 10/31/217 (sic), 6/2062015 (sic)
    ("mdy", re.compile(rf"{_L}(?P<m>\d{{1,2}})(?P<sep>[/\-.])\s?(?P<d>\d{{1,2}})(?P=sep)\s?(?P<y>\d{{2,4}}){_R}")),
    ("m_dy", re.compile(rf"{_L}(?P<m>\d{{1,2}})/(?P<d>\d{{2}})(?P<y>\d{{4}}){_R}")),
    # 05/2021, 02-2018, 02/ 2012
    ("my", re.compile(rf"{_L}(?P<m>\d{{1,2}})[/\-]\s?(?P<y>(?:19|20)\d\d){_R}")),
    # 09/19, 8/14 (MM/YY)
    ("m_yy", re.compile(rf"{_L}(?P<m>\d{{1,2}})/(?P<y>\d{{2}}){_R}")),
]
_NUMERIC_KINDS = ("iso", "mdy", "m_dy", "my", "m_yy")
_NUMERIC_BY_KIND = {kind: pattern for kind, pattern in _DATE_PATTERNS if kind in _NUMERIC_KINDS}


def _renamed(pattern: str, suffix: str) -> str:
    return re.sub(r"\(\?P(?:<|=)(\w+)", lambda m: m.group().replace(m.group(1), m.group(1) + suffix), pattern)


_NUMERIC_DATES = re.compile("|".join(
    f"(?P<{kind}>{_renamed(_NUMERIC_BY_KIND[kind].pattern, '_' + kind)})" for kind in _NUMERIC_KINDS))
_MONTH_KINDS = {"mdd_y", "md_y", "d_mon_y", "y_mon", "mon_y", "y_mon_d", "mon_sp_yy", "mon_yy"}
_ANY_MONTH = re.compile(r"(?i)(?<![a-z])(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)")
# 08/26-29/2019 (a span of days), masked as two dates so window patterns read it as a range
_DAY_RANGE = re.compile(rf"{_L}(?P<m>\d{{1,2}})/(?P<d>\d{{1,2}})\s?-\s?(?P<d2>\d{{1,2}})/(?P<y>\d{{4}}){_R}")
# 0724/2016, 1214/2019: month and day typed together, then the year
_MMDD_YEAR = re.compile(rf"{_L}(?P<m>0[1-9]|1[0-2])(?P<d>[0-3]\d)/(?P<y>(?:19|20)\d\d){_R}")
_EXPIRY_WORD = (r"(?:exp(?:iry|iration|ires|iring)?\.?(?:\s*dates?)?|bud|beyond\s+use(?:\s+date)?|use\s+by"
                r"|discard\s+(?:by|after))")
# Forms that are dates only next to an expiry word: "exp. date 08 2020", "Exp 2016", "within expiry through 2016".
_CONTEXT_MONTH_YEAR = re.compile(
    rf"(?i)\b{_EXPIRY_WORD}[\s:.#,\-]*(?P<date>(?P<m>\d{{1,2}})\s+(?P<y>(?:19|20)\d\d))\b(?![/\-.]\d)")
_CONTEXT_YEAR = re.compile(
    rf"(?i)\b(?:{_EXPIRY_WORD}|within\s+expiry\s+(?:through|thru|until|to))[\s:.#,\-]*(?P<date>(?P<y>(?:19|20)\d\d))\b(?![/\-.]\d)")
_GLUED_EXPIRY = re.compile(r"(?i)\b(exp|expiry|bud)\.?(?=\d)")  # EXP01JUL2015, Exp10/23/2015, Exp.04/2019
_DATE_RANGE_GLUE = re.compile(r"(\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}/\d{4})-(?=\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}/\d{4})")


def _iso(year: int | None, month: int | None, day: int | None = None) -> str | None:
    if year is None:
        return None
    if year < 100:
        year += 2000 if year < 70 else 1900
    if not 1990 <= year <= 2099:
        return None
    if month is None:
        return f"{year:04d}"
    if day is not None and month > 12 and day <= 12:  # day-first writing (MFD: 18.07.2013)
        month, day = day, month
    if not 1 <= month <= 12:
        return None
    if day is None:
        return f"{year:04d}-{month:02d}"
    if not 1 <= day <= 31:
        return f"{year:04d}-{month:02d}"
    return f"{year:04d}-{month:02d}-{day:02d}"


def _date_value(kind: str, match: re.Match) -> str | None:
    groups = match.groupdict()
    month = _MONTH_NUMBERS[groups["mon"].lower().rstrip(".")] if groups.get("mon") else (
        int(groups["m"]) if groups.get("m") else None)
    day = int(groups["d"]) if groups.get("d") else None
    year = int(groups["y"]) if groups.get("y") else None
    if year is not None and len(groups["y"]) not in (2, 4):
        return None  # 10/31/217: a date (never a lot) whose value we cannot read
    return _iso(year, month, day)


# --- tokens ---------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\x01\d+\x02"                     # a masked date
    r"|\x03\d+\x04"                    # a lifted composite lot
    rf"|[A-Za-z0-9%{_SEAM}]+(?:[-@_:+/.][A-Za-z0-9%{_SEAM}]+)*"
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
_MONTH_WORDS = {m.upper() for m in _MONTH_NUMBERS}
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

# --- windows and "all lots" -----------------------------------------------------------------------

_D = r"\x01(\d+)\x02"
_ALL_LOTS = re.compile(
    r"\ball\s+(?:(?:of\s+the|the|unexpired|non-expired|remaining|sterile|compounded|affected|lots\s+and)\s+)*"
    r"(?:lots?|lot\s+(?:codes?|numbers?)|batch(?:es)?|products?|units|codes|product\s+lots)\b",
    re.I,
)
_UNEXPIRED = re.compile(
    r"(?i)\b(?:within\s+(?:their\s+)?expiry|within\s+expiration|unexpired|non-expired|not\s+expired|in[\s-]date)\b")
# Words that name an expiry: "expiration dates", "Expirations dates", "expiry", "BUDs", "Use by Date".
_EXPIRY_NAME = r"(?:exp\w*|buds?|beyond\s+use|use\s+by)\.?\s*(?:dates?\b)?"
# "expiration dates between A and B", "expiration dates 7/2018 to 6/2020", "Use by Date of A to B",
# "BUDs between A and B", "Expirations dates of .A to B" (a stray full stop)
_EXPIRY_WINDOW = re.compile(
    rf"(?i)\b{_EXPIRY_NAME}\s*:?\s*(?:(?:between|from|of|ranging\s+from)\s*)?\.?\s*{_D}\s*(?:and|to|through|thru|-)\s*{_D}")
_A_DATE_RANGE = re.compile(r"(?i)\x02\s*(?:and|to|through|thru|-)\s*\x01")  # any window needs one
# "... and b) 09/25/2016 to 10/01/2016", "; b) All lots with expiry between 09/11 to 12/13": more windows
_EXPIRY_CONTINUED = re.compile(
    rf"(?i)\s*(?:,|;)?\s*(?:and\s+)?(?:[a-z]\)\s*)?(?:{_D}|(?:all\s+lots\s+with\s+)?{_EXPIRY_NAME}\s*"
    rf"(?:between|from|of)?\s*{_D})\s*(?:and|to|through|thru|-)\s*{_D}")
# An open start: "within expiry through 2016", "expiration dates up to 11/17/2015",
# "through Expiration Date 06/01/2018", "expiring on or before A"
_EXPIRY_UNTIL = re.compile(
    rf"(?i)\b(?:within\s+expiry\s+(?:through|thru|until|to)"
    rf"|{_EXPIRY_NAME}\s*:?\s*(?:up\s+to|through|thru|until|on\s+or\s+before|before|prior\s+to|no\s+later\s+than)"
    rf"|(?:up\s+to|through|thru|until)\s+(?:the\s+)?(?:exp\w*|expiry)\.?\s*(?:dates?\b)?\s*:?\s*(?:of\s+)?)"
    rf"\s*{_D}")
_UNTIL_WORDS = ("up to", "through", "thru", "until", "before", "prior to", "no later", "within expiry")
_MANUFACTURED_WINDOW = re.compile(
    rf"(?i)\b(?:(?:manufactured|made|produced|prepared|compounded|packaged)\s+(?:and\s+distributed\s+)?"
    rf"|repackaged\s+)(?:between|from|on)\s+{_D}\s*(?:and|to|through|thru|-)\s*{_D}")
_LOT_DATE_RANGE = re.compile(rf"(?i)\blots?\b\s*(?:#|no\.?|numbers?)?\s*:?\s*{_D}\s*(?:to|through|thru|-)\s*{_D}")
_WINDOW_CONTINUED = re.compile(rf"\s*(?:and|,|;)\s*{_D}\s*(?:to|through|thru|-)\s*{_D}")
_DISPENSED_WINDOW = re.compile(
    rf"(?i)\b(?:distributed|dispensed|filled|sold|shipped|stored\s+and\s+distributed)\s+(?:[A-Za-z]+\s+){{0,3}}?"
    rf"(?:between\s+|from\s+)?{_D}\s*(?:and|to|through|thru|-)\s*{_D}")


class ScopeAttribute(dict):
    """attributes["lot_scope"] of a whole record: a plain JSON dict that can also hand each lot-level
    fact its own entry in O(1) (a record of 3,000 lots must not copy 3,000 entries into each of its
    3,000 facts, nor search the list 3,000 times)."""

    def for_lot(self, lot: str) -> dict:
        index = self.__dict__.get("_index")
        if index is None:
            index = {entry["lot"]: entry for entry in self["lots"]}
            self.__dict__["_index"] = index
        entry = index.get(lot, {"lot": lot, "expiry": None})
        narrowed = {k: (list(v) if isinstance(v, list) else v) for k, v in self.items() if k != "lots"}
        narrowed["lots"] = [dict(entry)]
        narrowed["uncertain"] = [text for text in self["uncertain"] if printed_lot(text) == lot]
        return narrowed


def stored_scope(attributes: dict, lot: str | None = None) -> dict:
    """A recall fact's lot scope, also for facts written before lot_scope existed (re-ingestion does not
    re-version facts whose meaning did not change, so those keep their old attributes)."""
    scope = (attributes or {}).get("lot_scope")
    if scope:
        return scope
    kind = "lots" if lot else "all_lots"
    return {"kind": kind, "lots": [{"lot": lot, "expiry": None}] if lot else [], "expiry_window": None,
            "dispensed_window": None, "manufactured_window": None, "truncated": False, "uncertain": []}


@dataclass(frozen=True)
class ScopedLot:
    lot: str  # as printed (drugs.lots.printed_lot); compared with dispensed lots by drugs.lots.canonical_lot
    expiry: str | None = None  # ISO "YYYY-MM" or "YYYY-MM-DD" as written next to the lot


@dataclass
class LotScope:
    kind: str
    lots: list[ScopedLot] = field(default_factory=list)
    expiry_window: tuple[str | None, str | None] | None = None
    dispensed_window: tuple[str | None, str | None] | None = None
    manufactured_window: tuple[str | None, str | None] | None = None
    truncated: bool = False
    uncertain: list[str] = field(default_factory=list)
    says_all_lots: bool = False  # the text itself says every lot (not just: no lot found)

    @property
    def lot_numbers(self) -> list[str]:
        return [entry.lot for entry in self.lots]

    @property
    def has_window(self) -> bool:
        return any(w is not None for w in (self.expiry_window, self.dispensed_window, self.manufactured_window))

    def as_attribute(self) -> ScopeAttribute:
        """The JSON shape stored in a recall fact's attributes["lot_scope"] (docs/contracts-session2.md)."""
        attribute = ScopeAttribute(self._flags_and_windows())
        attribute["lots"] = [{"lot": e.lot, "expiry": e.expiry} for e in self.lots]
        return attribute

    def _flags_and_windows(self) -> dict:
        return {
            "kind": self.kind,
            "lots": [],
            "expiry_window": list(self.expiry_window) if self.expiry_window else None,
            "dispensed_window": list(self.dispensed_window) if self.dispensed_window else None,
            "manufactured_window": list(self.manufactured_window) if self.manufactured_window else None,
            "truncated": self.truncated,
            "uncertain": list(self.uncertain),
        }


def scope_terms(lot_scope: dict | None) -> dict | None:
    """The part of a stored lot_scope that changes who a fact can touch, for its content hash: None for
    scopes that mean what a fact without lot_scope meant (a named lot; every lot), so adding the structured
    scope to existing facts does not re-version them; otherwise the kind, windows and uncertain flags."""
    if not lot_scope:
        return None
    terms = {k: lot_scope.get(k) for k in ("expiry_window", "dispensed_window", "manufactured_window")
             if lot_scope.get(k)}
    if lot_scope.get("uncertain"):
        terms["uncertain"] = sorted(lot_scope["uncertain"])
    if not terms:
        return None
    terms["kind"] = lot_scope.get("kind")
    return terms


# --- joining code_info and more_code_info --------------------------------------------------------

def _join_fields(code_info: str, more: str) -> tuple[str, bool, bool]:
    """(text, truncated, cut_at_end): openFDA cuts code_info at 32,600 characters and (sometimes) continues
    in more_code_info mid-token; a code_info of exactly the cut length ends inside a token."""
    truncated = len(code_info) >= TRUNCATED_AT
    if not more:
        return code_info, truncated, truncated and len(code_info) >= OPENFDA_CUT - 1 and code_info[-1:].isalnum()
    if truncated and len(code_info) >= OPENFDA_CUT and code_info[-1:].isalnum() and more[:1].isalnum():
        return code_info + _SEAM + more, truncated, False
    return f"{code_info} {more}", truncated, False


_WORDISH = re.compile(r"[A-Za-z0-9]+")


_SHAPE_TABLE = str.maketrans("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                             "9" * 10 + "A" * 52)


def _shape(token: str) -> str:
    return token.translate(_SHAPE_TABLE)


def _unwrap(text: str) -> str:
    """Take out the spaces openFDA's re-wrap put inside tokens (about every 4,000 characters: 'Cod e',
    'Lot Num ber', '1608 70306M'), keeping a seam mark in the joined token. A space is taken out only
    when the joined token is one the rest of the text uses (the word, or the lot shape) and the pieces
    are not."""
    if len(text) <= REWRAP_EVERY:
        return text
    words = Counter(_WORDISH.findall(text.lower()))
    shapes = Counter()
    for word, count in words.items():
        if not word.isalpha():
            shapes[_shape(word)] += count
    cuts = []
    for k in range(1, len(text) // REWRAP_EVERY + 1):
        centre = k * REWRAP_EVERY
        best = None
        for p in range(max(1, centre - 16), min(len(text) - 1, centre + 16)):
            if text[p] != " " or not text[p - 1].isalnum() or not text[p + 1].isalnum():
                continue
            left = re.search(r"[A-Za-z0-9]+$", text[max(0, p - 64):p]).group()
            right = re.match(r"[A-Za-z0-9]+", text[p + 1:p + 65]).group()
            joined = (left + right).lower()
            if any(ch.isdigit() for ch in joined):
                common = shapes.get(_shape(joined), 0)
                score = common if common >= 5 and shapes.get(_shape(left.lower()), 0) * 4 < common and \
                    shapes.get(_shape(right.lower()), 0) * 4 < common else 0
            else:
                score = words.get(joined, 0) if words.get(left.lower(), 0) + words.get(right.lower(), 0) == 2 else 0
            if score >= 2 and (best is None or score > best[0]):
                best = (score, p)
        if best:
            cuts.append(best[1])
    if not cuts:
        return text
    pieces, last = [], 0
    for p in cuts:
        pieces.append(text[last:p])
        pieces.append(_SEAM)
        last = p + 1
    pieces.append(text[last:])
    return "".join(pieces)


# --- the parser -----------------------------------------------------------------------------------

def _mask_dates(text: str) -> tuple[str, list[str | None]]:
    """Replace every written date by \\x01n\\x02 (n indexes the returned ISO values)."""
    values: list[str | None] = []
    spans: list[tuple[int, int, str | None]] = []
    taken = bytearray(len(text))

    def claim(start, end, value):
        if any(taken[start:end]):
            return
        taken[start:end] = b"\x01" * (end - start)
        spans.append((start, end, value))

    ranges = {}
    for match in _DAY_RANGE.finditer(text):
        start = len(spans)
        claim(match.start(), match.end(), _iso(int(match["y"]), int(match["m"]), int(match["d"])))
        if len(spans) > start:
            ranges[match.start()] = _iso(int(match["y"]), int(match["m"]), int(match["d2"]))
    for match in _MMDD_YEAR.finditer(text):
        claim(match.start(), match.end(), _iso(int(match["y"]), int(match["m"]), int(match["d"])))
    for match in _CONTEXT_MONTH_YEAR.finditer(text):
        claim(match.start("date"), match.end("date"), _iso(int(match["y"]), int(match["m"])))
    for match in _CONTEXT_YEAR.finditer(text):
        claim(match.start("date"), match.end("date"), _iso(int(match["y"]), None))
    if _ANY_MONTH.search(text):  # month-name patterns are slow; most long lot lists have no month name
        for kind, pattern in _DATE_PATTERNS:
            if kind in _MONTH_KINDS:
                for match in pattern.finditer(text):
                    claim(match.start(), match.end(), _date_value(kind, match))
    # The numeric forms in one pass (one scan of a 200,000-character text instead of five).
    for match in _NUMERIC_DATES.finditer(text):
        kind = match.lastgroup
        alone = _NUMERIC_BY_KIND[kind].match(match.group())
        claim(match.start(), match.end(), _date_value(kind, alone) if alone else None)
    if not spans:
        return text, values
    spans.sort()
    out, last = [], 0
    for start, end, value in spans:
        out.append(text[last:start])
        out.append(f" \x01{len(values)}\x02 ")
        values.append(value)
        if start in ranges:  # the end of a span of days
            out.append(f"- \x01{len(values)}\x02 ")
            values.append(ranges[start])
        last = end
    out.append(text[last:])
    return "".join(out), values


def _prepare(text: str) -> str:
    text = text.replace("\u00a0", " ")
    text = re.sub(r"(?i)\b(lots?|batch)(?=\d)", r"\1 ", text)                 # "Lots15952"
    text = re.sub(r"(?i)\b(between|from|through|thru)(?=\d)", r"\1 ", text)   # "expiry between10/2020-07/2023"
    text = re.sub(r"(?i)-(exp|bud)\b", r" \1", text)                          # "12CQ005-Exp. 02/14", "722995-exp 07/22"
    text = re.sub(r"(?i)\b(lots?|batch|exp|ndc|upc|bud|rx)\s*[#:]", r"\1 # ", text)  # "Lot#:123", "NDC:..."
    text = _GLUED_EXPIRY.sub(r"\1 ", text)
    text = re.sub(r"(?<![\w,])\d{1,3}(?:,\d{3})+(?![\w,])", " ", text)  # quantities: 70,200
    # Compounding lots typed with a stray space: "01052016:    06@43", "01132016:74 @17".
    if "@" in text:
        text = re.sub(r"(\d{6,8}):\s+(\d{1,3}\s?@\d+)", r"\1:\2", text)
        text = re.sub(r"(\d{6,8}:\d{1,3})\s+@(\d+)", r"\1@\2", text)
    text = _DATE_RANGE_GLUE.sub(r"\1 - ", text)
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


def _span(windows: list) -> tuple[str | None, str | None] | None:
    """Several written windows as one that covers them all (over-notify rather than under-notify)."""
    if not windows:
        return None
    starts = [w[0] for w in windows if w[0]]
    ends = [w[1] for w in windows if w[1]]
    return (min(starts) if starts else None, max(ends) if ends else None)


def _window(match: re.Match, values: list[str | None]) -> tuple[str | None, str | None]:
    return values[int(match.group(1))], values[int(match.group(2))]


def _windows(masked: str, values: list[str | None], low: str) -> dict:
    """Windows written in the text. Each pattern runs only when its key word occurs (long lot lists
    have none, and these patterns are the slow part of a 200,000-character text)."""
    found = {"expiry_window": None, "dispensed_window": None, "manufactured_window": None}
    rest = masked
    if any(word in low for word in ("manufactured", "made", "produced", "prepared", "compounded", "packaged")):
        for match in _MANUFACTURED_WINDOW.finditer(masked):
            found["manufactured_window"] = found["manufactured_window"] or _window(match, values)
            rest = rest.replace(match.group(), " ")
    # "Distributed Before 8/5/15", "distributed prior to and including 05/23/2013" are not read as windows:
    # the date bounds the firm's distribution, and a pharmacy can dispense a pack after it (the window
    # would exclude exposed patients).
    if any(word in low for word in ("distributed", "dispensed", "filled", "sold", "shipped")):
        spans = []
        for match in _DISPENSED_WINDOW.finditer(rest):
            spans.append(_window(match, values))
            # "dispensed on 08/26-29/2019 and 09/27/2019 through 10/03/2019": one window over both spans
            for more in _WINDOW_CONTINUED.finditer(rest, match.end()):
                if more.start() != match.end():
                    break
                spans.append(_window(more, values))
                break
        found["dispensed_window"] = _span(spans)
    if "exp" in low or "bud" in low or "use by" in low or "beyond use" in low:
        spans = []
        for match in _EXPIRY_WINDOW.finditer(masked) if _A_DATE_RANGE.search(masked) else ():
            spans.append(_window(match, values))
            # "a) Expirations dates of A to B and b) C to D": one window over every span written
            at = match.end()
            while more := _EXPIRY_CONTINUED.match(masked, at):
                dates = [int(d) for d in more.groups() if d is not None]
                spans.append((values[dates[0]], values[dates[-1]]))
                at = more.end()
        found["expiry_window"] = _span(spans)
        if found["expiry_window"] is None and any(word in low for word in _UNTIL_WORDS):
            until = [values[int(m.group(1))] for m in _EXPIRY_UNTIL.finditer(masked)]
            if until:
                found["expiry_window"] = (None, max(v for v in until if v) if any(until) else None)
    if found["expiry_window"] is None and any(word in low for word in ("within", "expired", "in date", "in-date")):
        if _UNEXPIRED.search(masked):
            found["expiry_window"] = (None, None)  # unexpired when recalled: ingestion knows the date
    return found


def parse_scope(code_info: str, more_code_info: str = "") -> LotScope:
    """The structured scope of a recall's code_info (+ more_code_info). Never raises on text."""
    code_info = str(code_info or "")
    more_code_info = str(more_code_info or "")
    text, truncated, cut_at_end = _join_fields(code_info, more_code_info)
    text = _unwrap(text)
    composites: list[str] = []

    def lift(match):
        composites.append(" ".join(match.groups()))
        return f" \x03{len(composites) - 1}\x04 "

    text = _COMPOSITE_LOT.sub(lift, _prepare(text))
    masked, dates = _mask_dates(text)
    found, uncertain = _walk(masked, dates, composites, cut_at_end=cut_at_end)
    low = masked.lower()
    windows = _windows(masked, dates, low)
    lot_range_match = _LOT_DATE_RANGE.search(masked) if not found and "lot" in low else None
    says_all = "all" in low and bool(_ALL_LOTS.search(masked))
    if lot_range_match and not found and not windows["manufactured_window"]:
        windows["manufactured_window"] = _window(lot_range_match, dates)
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
        seam = _SEAM in raw
        lot = printed_lot(raw.replace(_SEAM, ""))
        if not lot:
            return
        if cut_at_end and end >= text_end:
            uncertain.append(raw.replace(_SEAM, ""))  # the cut lot: flagged, never matched as a fragment
            return
        if seam:
            uncertain.append(lot)
        last_was_letters = bool(re.fullmatch(r"[A-Z]{3,6}(?:-\d{1,2})?", lot))
        if lot not in found:
            found[lot] = ScopedLot(lot)
            order.append(lot)
            pending.append(lot)

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
