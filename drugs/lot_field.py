"""What a pharmacy's lot field holds, read as a pharmacist reads it.

    read_lot_field(text) -> LotField(text, lot, printed, expiry, alternatives, reading, gtin, serial)

Pharmacy systems store what was keyed or scanned into the lot field, and that is often more than the
lot: `3069020 EXP 05/2026`, `3069020 (05/26)`, `LOT# 3069020, 2026-05`, `EXP MAY-26 3069020`,
`L: 3069020`, `="0306902"` (a spreadsheet keeping its leading zero), a GS1 element string
`(01)00303785814771(17)260531(10)3069020`, raw scanner output with group separators, a GS1 Digital
Link URI. A lot compared with its expiry glued on equals no recall's lot, and the patient holding a
recalled pack would be told "safe". So the field is read once, on every entry path, into:

- `lot`: the canonical lot (drugs.lots.canonical_lot) every comparison uses;
- `printed`: that lot as printed, for people;
- `expiry`: an expiry written in the field (a month alone means its last day, as GS1 reads day 00);
- `alternatives`: other canonical lots the field may mean when it cannot be read cleanly — each whole
  token and each run of adjacent tokens, and the whole field when something was taken off it. A
  recall lot equal to an alternative is a *probable* match for a pharmacist, and only for the same
  product (drugs.matching): never "safe", never a lot match across products;
- `reading`: how the field was read, in words a pharmacist can check ("" when it held only a lot).

What is clean: a lot alone, a lot after a lot word (`LOT`, `LOT#`, `BATCH`, `(10)`), a GS1 element string or
Digital Link, and a lot with its expiry marked by an expiry word (`EXP`, `EXPIRY`, `BUD`, `USE BY`, ...) set
apart by a space, a colon or an underscore, or in brackets or after a comma or semicolon. A date written with
its own separators or a month name after a space, hyphen or slash (`3069020 05/26`, `3069020-MAY 2026`) is
read as the expiry, and the whole field stays an alternative. Digits that may be a date or may be the lot's
own end (`3069020-0526`, `3069020 0526`) are not guessed: the whole field stays the lot and the part before
them an alternative. A lot never matches on its own, alternative or not: the product must agree.
"""

import calendar
import functools
import itertools
import re
import unicodedata
from dataclasses import dataclass
from datetime import date

from .dates import MONTH_NUMBERS
from .gs1 import GROUP_SEPARATOR, SEPARATOR_SUBSTITUTES, ScanError, parse_scan
from .lots import CONFUSABLES, canonical_lot, printed_lot

_CONFUSABLE_TABLE = str.maketrans(CONFUSABLES)
VISIBLE_GROUP_SEPARATOR = SEPARATOR_SUBSTITUTES[0]  # U+241D, a substitute drugs.gs1 reads as GS

MAX_ALTERNATIVES = 24  # a lot field of ~8 tokens gives at most 36 runs; more means it is not one pack's lot
_MIN_ALTERNATIVE = 3  # shorter tokens ("A", "12") are suffixes and sizes, not lots
_MAX_RUN = 4  # tokens joined into one alternative

# Spanish month abbreviations that differ from English ones (labels printed for both markets).
_MONTHS = {**MONTH_NUMBERS, "ene": 1, "abr": 4, "ago": 8, "dic": 12}
_MON = "(?:" + "|".join(sorted((m.upper() for m in _MONTHS), key=len, reverse=True)) + ")"

_EXPIRY_WORD = (r"(?:EXP(?:IRY|IRATION|IRES|IRING)?(?:\s*DATE|\s*DT|D)?|EXD|BUD|USE\s*BY|USE\s*BEFORE|BEST\s*BEFORE"
                r"|VENC(?:IMIENTO)?|CAD(?:UCIDAD)?|VTO)")
# Short expiry marks ("E 05/26", "EX: 05/2026"): only with a space or punctuation before the date, since
# "E0526" may be a lot.
_SHORT_EXPIRY_WORD = r"(?:E|EX|XP|BB)"
_OTHER_DATE_WORD = r"(?:MFG|MFD|MFR|MANUFACTURED|MADE|DOM|PROD(?:UCED)?)(?:\s*DATE)?"
_SERIAL_WORD = r"(?:SN|S/N|SERIAL(?:\s*(?:NO|NUMBER|#))?)"
_NDC_WORD = r"(?:NDC|UPC|GTIN)"

# A date with its own separators or a month name: read as a date wherever it stands apart.
_Y4 = r"(?:19|20)\d\d"
_M = r"(?:0?[1-9]|1[0-2])"
_D = r"(?:0?[1-9]|[12]\d|3[01])"

def _same_separator(pattern: str) -> str:
    """A three-part date written with one separator ("05/31/2026", "2026-05-31"), never mixed: "2-05/2026"
    is a lot's suffix and a month/year."""
    return pattern.replace("~", r"(?P<s>[\-/.])", 1).replace("~", "(?P=s)", 1)


_SEPARATED_DATES = [
    ("ymd", _same_separator(rf"(?P<y>{_Y4})~(?P<m>{_M})~(?P<d>{_D})")),
    ("mdy", _same_separator(rf"(?P<m>{_M})~(?P<d>{_D})~(?P<y>{_Y4}|\d\d)")),
    ("dmy", _same_separator(rf"(?P<d>{_D})~(?P<m>{_M})~(?P<y>{_Y4})")),
    ("dmony", rf"(?P<d>{_D})[\s\-/.]?(?P<mon>{_MON})\.?[\s\-/.,]?(?P<y>{_Y4}|\d\d)"),
    ("mondy", rf"(?P<mon>{_MON})\.?\s*(?P<d>{_D}),?\s+(?P<y>{_Y4})"),
    ("mony", rf"(?P<mon>{_MON})\.?[\s\-/.,]?\s*(?P<y>{_Y4}|\d\d)"),
    ("ymon", rf"(?P<y>{_Y4})[\s\-/.]?(?P<mon>{_MON})"),
    ("ym", rf"(?P<y>{_Y4})\s?[\-/.]\s?(?P<m>{_M})"),
    ("my", rf"(?P<m>{_M})\s?[\-/.]\s?(?P<y>{_Y4}|\d\d)"),
    ("yym", rf"(?P<y>1[3-9]|[2-9]\d)\s?[\-/.]\s?(?P<m>{_M})"),  # 26/05: YY/MM only where MM/YY cannot be
]
# Digits alone: a date only next to an expiry word or in brackets (else they may be the lot's own end).
_COMPACT_DATES = [
    ("yyyymmdd", r"(?P<y>(?:19|20)\d\d)(?P<m>0[1-9]|1[0-2])(?P<d>0[1-9]|[12]\d|3[01])"),
    ("mmddyyyy", r"(?P<m>0[1-9]|1[0-2])(?P<d>0[1-9]|[12]\d|3[01])(?P<y>(?:19|20)\d\d)"),
    ("yymmdd", r"(?P<y>\d\d)(?P<m>0[1-9]|1[0-2])(?P<d>0[0-9]|[12]\d|3[01])"),  # GS1 (17): day 00 = month end
    ("mmyyyy", r"(?P<m>0[1-9]|1[0-2])(?P<y>(?:19|20)\d\d)"),
    ("yyyymm", r"(?P<y>(?:19|20)\d\d)(?P<m>0[1-9]|1[0-2])"),
    ("mmyy", r"(?P<m>0[1-9]|1[0-2])(?P<y>\d\d)"),
    ("yymon", rf"(?P<y>\d\d)(?P<mon>{_MON})"),  # "EXP 22MAR": a day without a year is no expiry
    ("yyyy", r"(?P<y>(?:19|20)\d\d)"),
]
_DATE_BODY = "|".join(f"(?:{pattern})" for _, pattern in _SEPARATED_DATES)
_COMPACT_BODY = "|".join(f"(?:{pattern})" for _, pattern in _COMPACT_DATES)
_ANY_DATE = rf"(?:{_DATE_BODY}|{_COMPACT_BODY})"
# Named groups repeat across the alternatives above, so these are only used to find spans; the value
# is read again by _date_value with each pattern on its own.


def _unnamed(pattern: str) -> str:
    return re.sub(r"\(\?P<\w+>", "(?:", pattern).replace("(?P=s)", r"[\-/.]")


_DATE_SPAN = _unnamed(_DATE_BODY)
_ANY_DATE_SPAN = _unnamed(_ANY_DATE)

# A colon or an underscore sets a word apart as a space does ("3069020:EXP 05/21", "PW05264_EXP_1119"):
# lots carry neither (drugs.lots.canonical_lot drops both).
_END = r"(?=$|[\s,;|)\]}_:])"
_START = r"(?:(?<=^)|(?<=[\s,;|(\[{/\-:_]))"
# A short mark after a hyphen is the lot's own end ("20130318-E 05/2026" is lot 20130318-E and its expiry).
_START_SHORT = r"(?:(?<=^)|(?<=[\s,;|(\[{/:_]))"
_WORDED_EXPIRY = re.compile(rf"(?:{_START}{_EXPIRY_WORD}\s*[:.#=\-_]?\s*|{_START_SHORT}{_SHORT_EXPIRY_WORD}"
                            rf"(?:\s*[:.#=_]\s*|\s+))(?P<date>{_ANY_DATE_SPAN}){_END}")
# "3069020EXP0526", "3069020EXP05/26": the word glued to the lot (also how such a field looks once
# stored canonical, every space and slash dropped).
_GLUED_EXPIRY = re.compile(rf"(?<=[A-Z0-9])(?:EXP|EXPIRY|EXD|BUD)\s*[:.#\-]?\s*(?P<date>{_ANY_DATE_SPAN}){_END}")
_OTHER_DATE = re.compile(rf"{_START}{_OTHER_DATE_WORD}\s*[:.#=\-_]?\s*(?P<date>{_ANY_DATE_SPAN}){_END}")
_BRACKETED_DATE = re.compile(rf"[(\[{{]\s*(?:{_EXPIRY_WORD}\s*[:.#=\-]?\s*)?(?P<date>{_ANY_DATE_SPAN})\s*[)\]}}]")
_LISTED_DATE = re.compile(rf"[,;|]\s*(?P<date>{_DATE_SPAN})\s*(?=$|[,;|])")
_LEADING_LISTED_DATE = re.compile(rf"^\s*(?P<date>{_DATE_SPAN})\s*[,;|]")
# A date before the lot, apart from it by a space ("05/2026 3069020"); joined by a hyphen it may be the
# lot's own beginning ("01-09-2020138" is a lot).
_LEADING_DATE = re.compile(rf"^\s*(?P<date>{_DATE_SPAN})\s+(?=[A-Z0-9])")
# A short suffix or a six- or eight-digit date after a hyphen or a dot, ending the field.
_SUFFIX_AFTER_LOT = re.compile(r"(?<=[A-Z0-9])[-.](?P<suffix>[A-Z0-9]{1,2}|\d{6}|\d{8})\s*$")
_TRAILING_DIGITS = re.compile(r"(?<=[A-Z0-9])(?:\s+|\s*-\s*)(?P<date>\d{4}|\d{6}|\d{8})\s*$")
_SERIAL = re.compile(rf"{_START}{_SERIAL_WORD}\s*[:.#=\-_]?\s*(?P<serial>[A-Z0-9]+){_END}")
_NDC_IN_FIELD = re.compile(rf"{_START}{_NDC_WORD}\s*[:.#=\-_]?\s*(?P<ndc>\d[\d\-]{{8,13}}\d){_END}")

# Words that say "the lot follows": always taken off (as drugs.lots.canonical_lot does).
_LOT_WORD = re.compile(r"^(?:LOT|LOTE|LOTS|BATCH|BATCH\s*NO|B/N|CH\.?-?B\.?)\s*(?:NO\.?|NUMBER|NUM|#|:|\.)*\s*(?=\S)")
_AI_LOT = re.compile(r"^\(10\)\s*")
# Short markers that may also begin a lot ("L12345"): taken off only with punctuation or a space after
# them, and the field with them stays an alternative.
_SHORT_MARKER = re.compile(r"^(?:L|LT|LN|BN|B|NO|N|#)\s*[:#.\-]\s*|^(?:LT|LN|BN)\s+(?=\S)|^#\s*")
# Spreadsheet and typing debris around a value: ="00123", '00123, "00123", *00123*.
_SPREADSHEET_TEXT = re.compile(r'^=\s*"(.*)"$')
_EDGE_DEBRIS = "'\"`*=_.,;:!?~^|\\ "
# A marker left with nothing after it ("3069020 EXP", "3069020 EXP N/A"): not part of the lot.
_DANGLING_WORD = re.compile(rf"(?:\s+(?:{_EXPIRY_WORD}|LOT)|(?<=\d)(?:EXP|EXPIRY|LOT))"
                            r"\s*[:.#=\-]?\s*(?:N/?A|NONE|UNKNOWN)?$")
# Parts of a field: split where people separate codes (spaces, commas, semicolons, bars, brackets), not
# at the hyphens, dots and slashes lots carry inside them ("22165-003", "4L67-C035").
_PART_SEPARATOR = re.compile(r"[\s,;|()\[\]{}]+|\s/\s")
_MARKER_WORDS = {"LOT", "LOTE", "LOTS", "BATCH", "EXP", "EXPIRY", "EXPIRES", "EXPIRATION", "DATE", "NO", "NUMBER",
                 "BUD", "USE", "BY", "SN", "SERIAL", "NDC", "MFG", "MFD", "GTIN"}


# What staff type when they do not know the lot. Stored as a lot, it would match no recall and look like a
# real lot, and the holder of a recalled pack would be told "safe"; 'lot unknown' records the same fact
# honestly (docs/facts.md, "Patients' lots").
PLACEHOLDER_LOTS = frozenset({"UNKNOWN", "UNK", "N/A", "NA", "NONE", "NULL", "NIL", "TBD", "NOLOT", "NOTKNOWN",
                              "0", "00", "000", "X", "XX", "XXX"})
# The words of a phrase that says there is no lot ("NOT RECORDED", "SEE LABEL", "NO LOT #", "N/A - ASK RX").
# A real lot may be letters alone ("QJD"), so only a field made of these words, with no digit, is one.
_NO_LOT_WORDS = frozenset(
    "A ASK AVAIL AVAILABLE BLANK BOTTLE BOX CANNOT CANT CARTON CHECK DEFAULT DUMMY EMPTY ENTERED GIVEN ILLEGIBLE "
    "IN KNOWN LABEL LATER LISTED LOT LOTS MISSING N NA NBR NIL NO NONE NOT NOTED NULL NUM NUMBER ON PACK PACKAGE "
    "PENDING PHARMACY PRINTED READ READABLE RECORDED RX SEE SHOWN STOCK TBA TBD THE UNAVAILABLE UNK UNKNOWN "
    "UNREADABLE UNSPECIFIED VIAL X XX XXX".split())


def is_date_shaped(lot: str) -> bool:
    """The lot's letters and digits read as one date written as digits ("191223", "20200120", "0526"): such a
    part of a field may be its expiry as well as a lot (drugs.matching weighs it so on another maker's pack)."""
    key = canonical_lot(lot)
    return key.isdigit() and _date_value(key) is not None


def is_placeholder_lot(text: str) -> bool:
    """The field says there is no lot instead of naming one: a word staff type for it (PLACEHOLDER_LOTS),
    a phrase of such words with no digit ("NOT RECORDED", "SEE LABEL", "NO LOT"), or zeros alone ("0000")."""
    words = re.findall(r"[A-Z]+|\d+", unicodedata.normalize("NFKC", text or "").upper())
    if not words:
        return False
    joined = "".join(words)
    if joined in PLACEHOLDER_LOTS or set(joined) == {"0"}:
        return True
    return not any(word[0].isdigit() for word in words) and all(word in _NO_LOT_WORDS for word in words)


@dataclass(frozen=True)
class LotField:
    text: str                         # the field as entered (stripped)
    lot: str                          # canonical lot; "" when the field names none
    printed: str                      # the lot as printed, tidied
    expiry: date | None = None        # written in the field
    alternatives: tuple[str, ...] = ()  # other canonical lots it may mean (sorted)
    reading: str = ""                 # how it was read ("" for a lot alone)
    gtin: str = ""                    # from a GS1 element string or Digital Link
    serial: str = ""

    @property
    def clean(self) -> bool:
        """Read without doubt: no other lot the field may mean."""
        return not self.alternatives


def _normalised(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "").translate(_CONFUSABLE_TABLE)  # "РW05264": Cyrillic Р
    text = re.sub(r"[\u2010-\u2015\u2212]", "-", text)  # dashes typed or pasted as dashes
    text = re.sub(r"[\u200b-\u200d\u2060\ufeff]", "", text)  # zero-width characters
    # Not str.split(): it counts the GS1 group separator (ASCII 29) as white space.
    text = re.sub(r"[ \t\r\n\u00a0]+", " ", text).strip()
    if found := _SPREADSHEET_TEXT.match(text):
        text = found.group(1)
    return text.strip(_EDGE_DEBRIS)


def _looks_like_gs1(text: str) -> bool:
    if GROUP_SEPARATOR in text or any(ch in text for ch in SEPARATOR_SUBSTITUTES[:1]):
        return True
    if re.match(r"^\][A-Za-z]\d", text) or re.match(r"^\((?:01|10|17|21)\)", text):
        return True
    if re.search(r"(?i)https?://\S+/01/\d{8,14}", text):
        return True
    return bool(re.match(r"^01\d{14}(?:17\d{6}|10|21)", text.replace(" ", "")))


def _gs1(text: str) -> LotField | None:
    try:
        scan = parse_scan(text)
    except ScanError:
        return None
    if not scan.lot:
        return None
    return LotField(text=text, lot=canonical_lot(scan.lot), printed=printed_lot(scan.lot), expiry=scan.expiry,
                    reading="lot and expiry read from a GS1 barcode text in the lot field", gtin=scan.gtin,
                    serial=scan.serial)


def _year(value: str) -> int:
    year = int(value)
    return year + 2000 if year < 100 else year


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _date_value(written: str) -> date | None:
    """The expiry a written date means (a month alone: its last day), or None when it is not one date
    or reads as several different ones."""
    written = " ".join(written.split())
    for _kind, pattern in _SEPARATED_DATES:  # in order of preference: US month/day before day/month
        if (value := _read(pattern, written)) is not None:
            return value
    found = {value for _kind, pattern in _COMPACT_DATES if (value := _read(pattern, written)) is not None}
    return found.pop() if len(found) == 1 else None  # digits alone read two ways: not guessed


def _read(pattern: str, written: str) -> date | None:
    hit = re.fullmatch(pattern, written)
    if not hit:
        return None
    groups = {name: value for name, value in hit.groupdict().items() if value is not None}
    try:
        year = _year(groups["y"])
        month = _MONTHS[groups["mon"].lower()] if groups.get("mon") else int(groups.get("m") or 12)
        day = int(groups["d"]) if groups.get("d") else 0
        if not 1990 <= year <= 2100:
            return None
        return date(year, month, day) if day else _month_end(year, month)
    except (ValueError, KeyError):
        return None


class _Span:
    """A found date's place in the field, shaped like a regex match for `take`."""

    def __init__(self, text: str, start: int, end: int):
        self._text, self._start, self._end = text, start, end

    def group(self, _name="date") -> str:
        return self._text[self._start:self._end]

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end


def _trailing_date(text: str) -> tuple[_Span | None, str]:
    """(the date at the end of the field, "") or (None, the lot part when the date may be the lot's own
    end). The date is set apart from the lot by a space, else by a hyphen or slash, and the lot keeps
    everything a shorter date would leave it: in "110515-2 MAY 2026" the date is "MAY 2026", not "2 MAY
    2026" (the lot's own "-2"). Joined by the very separator the date is written with ("3069020-05-26"),
    the date may be the lot's own end: no date is taken, and the part before it is returned."""
    end = len(text.rstrip())
    for separators, starts in ((" ", range(1, end)), ("-/", range(end - 1, 0, -1))):
        for start in starts:
            if text[start - 1] not in separators or text[start] in " -/":
                continue
            lot = text[:start].rstrip(" -/")
            written = text[start:end]
            if not (lot and lot[-1].isalnum() and re.fullmatch(_DATE_SPAN, written) and _date_value(written)):
                continue
            if text[start - 1] != " " and text[start - 1] in written:
                return None, lot
            return _Span(text, start, end), ""
    return None, ""


class _TrailingDateSearch:
    """`_trailing_date` shaped as a compiled pattern for `take` (a date or nothing)."""

    @staticmethod
    def search(text: str):
        return _trailing_date(text)[0]


_TRAILING_DATE = _TrailingDateSearch()


def _cut(text: str, start: int, end: int) -> str:
    return f"{text[:start]} {text[end:]}"


def _tokens(text: str) -> list[str]:
    parts = (canonical_lot(part) for part in _PART_SEPARATOR.split(text))
    return [part for part in parts if part and part not in _MARKER_WORDS]


def _runs(tokens: list[str]) -> set[str]:
    runs = set()
    for start in range(len(tokens)):
        for length in range(1, min(_MAX_RUN, len(tokens) - start) + 1):
            run = "".join(tokens[start:start + length])
            if len(run) >= _MIN_ALTERNATIVE and any(ch.isdigit() for ch in run):
                runs.add(run)
    return runs


_GLUED_NOTE = "the lot may be only part of the field (a marker or an expiry glued to it)"
# Lot markers pharmacies glue to the front of a lot ("L3069020", "LT3069020", "LPW05264"). Not "B" or "N":
# many lots begin with them, and each such lot would be read with doubt (and decided apart by the sweep).
_GLUED_MARKERS = ("LOT", "LT", "LN", "L")
_MIN_GLUED = 4  # a shorter piece of a longer field is a suffix or a size, not a lot
_GLUED_SEPARATOR = re.compile(r"[^A-Z0-9\-.]+")
# An NDC (10 or 11 digits, or 4-4-2, 5-3-2, 5-4-1, 5-4-2 with hyphens) written before the lot with a slash or
# hyphen between them.
_LEADING_NDC = re.compile(r"^\s*(\d{4,5}-\d{3,4}-\d{1,2}|\d{10,11})\s*[-/]\s*(?=[A-Z0-9])")
# A date before the lot, joined to it by punctuation: "05/21-3069020", "2021-05/3069020", "EXP 05/21-3069020".
_LEADING_GLUED_DATE = re.compile(rf"^\s*(?P<date>(?:{_EXPIRY_WORD}\s*[:.#=\-_]?\s*)?{_DATE_SPAN})"
                                 r"\s*[-/:_]\s*(?=[A-Z0-9])")
# An expiry glued to a lot's end as digits: a month or a day, never a year alone ("...2026" may be the lot's).
_COMPACT_PATTERNS = dict(_COMPACT_DATES)
_GLUED_EXPIRY_KINDS = ((4, ("mmyy",)), (6, ("mmyyyy", "yymmdd")), (8, ("yyyymmdd", "mmddyyyy")))


def _alternatives(candidates, lot: str) -> tuple[str, ...]:
    """The candidates that may be a lot (long enough, with a digit, not the lot itself), sorted; the
    longest MAX_ALTERNATIVES when there are more."""
    kept = sorted(a for a in candidates if a and a != lot and len(a) >= _MIN_ALTERNATIVE
                  and any(ch.isdigit() for ch in a))
    if len(kept) > MAX_ALTERNATIVES:
        kept = sorted(sorted(kept, key=lambda a: (-len(a), a))[:MAX_ALTERNATIVES])
    return tuple(kept)


def _glued_readings(text: str, *, split: bool = True) -> set[str]:
    """Lots the field may hold when something is glued to the lot without the spaces or words the readings above
    look for: an expiry or other code after any punctuation ("3069020/0521", "3069020#EXP#05-26"), or a
    month or day glued on within a part cut off that way ("30690200521:X"), a lot marker ("L3069020",
    "LPW05264"), the pack's NDC, another code or a date before it ("1234567/3069020", "05/21/3069020",
    "05/21-3069020"). Each is an alternative: a probable match for the same product at most, never "safe"
    withheld and never a lot matched across products. The field is cut at any punctuation but the hyphens
    and dots lots carry inside them ("22165-003" stays whole). `split=False`, a field of letters and digits
    only: after a glued marker only, since one real lot in eleven ends in digits that read as a month
    ("00201125"), and each would be read with doubt."""
    segments = [canonical_lot(part) for part in _GLUED_SEPARATOR.split(text.upper())] if split else [text.upper()]
    segments = [segment for segment in segments if segment]
    if not segments:
        return set()
    joined = "".join(segments)
    ends = set(itertools.accumulate(len(segment) for segment in segments))
    for end in list(ends) if split else ():
        digits = re.search(r"\d*$", joined[:end]).group()
        for width, kinds in _GLUED_EXPIRY_KINDS:  # the shortest that reads as a month or a day
            tail = digits[-width:]
            if len(digits) >= width and end - width >= _MIN_GLUED and \
                    any(_read(_COMPACT_PATTERNS[kind], tail) for kind in kinds):
                ends.add(end - width)
                break
    starts = {0} | {len(marker) for marker in _GLUED_MARKERS
                    if joined.startswith(marker) and len(joined) - len(marker) >= _MIN_GLUED}
    if split and (ndc := _LEADING_NDC.match(text.upper())):  # "00378-5814-77/3069020": the NDC, then the lot
        starts.add(len(canonical_lot(ndc.group(1))))
    if split:
        # The lot after another code or a date, cut off by punctuation ("1234567/3069020", "05/21/3069020",
        # "EXP:0521/3069020"), or after a date joined to it by a hyphen ("05/21-3069020").
        starts |= {end for end in itertools.accumulate(len(segment) for segment in segments[:-1])}
        if date := _LEADING_GLUED_DATE.match(text.upper()):
            starts.add(len(canonical_lot(date.group("date"))))
    pieces = {joined[start:end] for start in starts for end in ends if end - start >= _MIN_GLUED}
    return {piece for piece in pieces if any(ch.isdigit() for ch in piece) and piece not in _MARKER_WORDS}


# Most fields hold a lot alone: letters and digits with no lot or expiry word inside.
_PLAIN_LOT = re.compile(r"[A-Za-z0-9]{1,100}")
_WORD_INSIDE = re.compile(r"(?i)LOT|BATCH|EXP|EXD|BUD")


@functools.lru_cache(maxsize=65536)
def read_lot_field(text: str) -> LotField:
    """Read one lot field as entered (see the module docstring). Pure: remembered per text, since a row
    is read when it is validated and again when it is saved. The text kept shows a scanner's group
    separator as its visible symbol (U+241D), which the GS1 reader takes as the separator too."""
    raw = (text or "").strip(" \t\r\n").replace(GROUP_SEPARATOR, VISIBLE_GROUP_SEPARATOR)
    if _PLAIN_LOT.fullmatch(raw) and not _WORD_INSIDE.search(raw):
        lot = raw.upper()
        glued = _alternatives(_glued_readings(lot, split=False), lot)
        return LotField(text=raw, lot=lot, printed=lot, alternatives=glued,
                        reading=_GLUED_NOTE if glued else "")
    field = _normalised(raw)
    if not field:
        return LotField(text=raw, lot="", printed="")
    if _looks_like_gs1(field) and (read := _gs1(field)) is not None:
        return LotField(text=raw, lot=read.lot, printed=read.printed, expiry=read.expiry, reading=read.reading,
                        gtin=read.gtin, serial=read.serial)
    work = field.upper()
    notes: list[str] = []
    doubtful: set[str] = set()  # other readings kept as alternatives
    expiry = None
    serial = ""

    def take(pattern, *, is_expiry: bool) -> bool:
        nonlocal work, expiry
        hit = pattern.search(work)
        if not hit:
            return False
        value = _date_value(hit.group("date"))
        if is_expiry and value is not None and expiry is None:
            expiry = value
        work = _cut(work, hit.start(), hit.end())
        return True

    if hit := _SERIAL.search(work):
        serial = hit.group("serial")
        work = _cut(work, hit.start(), hit.end())
        notes.append(f"serial {serial} set apart")
    if hit := _NDC_IN_FIELD.search(work):
        work = _cut(work, hit.start(), hit.end())
        notes.append("an NDC written in the field left out")
    for pattern in (_WORDED_EXPIRY, _GLUED_EXPIRY):
        if take(pattern, is_expiry=True):
            notes.append("expiry written in the field")
            break
    else:
        if take(_BRACKETED_DATE, is_expiry=True) or take(_LISTED_DATE, is_expiry=True) \
                or take(_LEADING_LISTED_DATE, is_expiry=True):
            notes.append("expiry written in the field")
        elif take(_TRAILING_DATE, is_expiry=True) or take(_LEADING_DATE, is_expiry=True):
            notes.append("a date beside the lot read as its expiry")
            doubtful.add(canonical_lot(field))
        elif lot_part := _trailing_date(work)[1]:
            doubtful.add(canonical_lot(lot_part))
            notes.append("its end may be an expiry or part of the lot")
    if take(_OTHER_DATE, is_expiry=False):
        notes.append("a manufacture date left out")
    work = _DANGLING_WORD.sub("", work.strip(_EDGE_DEBRIS + "-/")).strip(_EDGE_DEBRIS + "-/")
    unmarked = _LOT_WORD.sub("", work, count=1)
    unmarked = _AI_LOT.sub("", unmarked, count=1)
    short = _SHORT_MARKER.match(unmarked)
    if short and len(canonical_lot(unmarked[short.end():])) >= _MIN_ALTERNATIVE:
        doubtful.add(canonical_lot(unmarked))
        unmarked = unmarked[short.end():]
        notes.append(f"marker {short.group().strip()!r} taken as a lot word")
    if not expiry and (hit := _TRAILING_DIGITS.search(unmarked)):
        # 3069020-0526: a date, or the lot's own end? Not guessed: the whole stays the lot.
        before = canonical_lot(unmarked[:hit.start()])
        if len(before) >= _MIN_ALTERNATIVE and _date_value(hit.group("date")) is not None:
            doubtful.add(before)
            notes.append(f"{hit.group('date')} may be an expiry or part of the lot")
    if (hit := _SUFFIX_AFTER_LOT.search(unmarked)) and len(before := canonical_lot(unmarked[:hit.start()])) >= \
            _MIN_GLUED and before not in doubtful:
        # "3069020-071518": a repackager's date (MMDDYY) after the maker's lot; "3069020-1": a sub-lot or a
        # pharmacy's own suffix. The maker's lot is another reading (probable for the same product).
        doubtful.add(before)
        notes.append(f"'{hit.group(0).strip()}' after the lot may be a suffix or a repackager's date")
    lot = canonical_lot(unmarked)
    tokens = _tokens(unmarked)
    if len(tokens) > 1 and re.search(r"[,;|]|\s/\s|\s{2,}", unmarked):
        notes.append("several codes in the field")
    if len(tokens) > 1 or doubtful:
        doubtful |= _runs(tokens)
    alternatives = _alternatives(doubtful, lot)
    # Then what the readings above left whole (kept only where the cap leaves room: they are the
    # loosest readings): the lot at the start of what is left once they took off what they know, cut at
    # punctuation or where an expiry may be glued on, or after a marker or an NDC before it.
    glued = {a for a in _glued_readings(unmarked) if a not in alternatives}
    if glued and len(alternatives) < MAX_ALTERNATIVES:
        extra = _alternatives(glued, lot)[:MAX_ALTERNATIVES - len(alternatives)]
        if extra:
            alternatives = tuple(sorted((*alternatives, *extra)))
            notes.append(_GLUED_NOTE)
    if not notes and alternatives:
        notes.append("several codes in the field")
    return LotField(text=raw, lot=lot, printed=printed_lot(unmarked) if lot else "", expiry=expiry,
                    alternatives=alternatives, reading="; ".join(notes), serial=serial)
