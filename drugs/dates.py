"""Written dates in recall text (`Exp 10/31/2022`, `EXP01JUL2015`, `BUD 06/08/14`, `29-Dec-19`, ranges):
read to ISO values and masked as one DATE token each, so no date or date fragment can become a lot."""

from __future__ import annotations

import re

from django.utils.dates import MONTHS
from django.utils.translation import gettext as _

MONTH_NUMBERS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4, "may": 5,
    "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9, "sept": 9, "september": 9,
    "oct": 10, "october": 10, "nov": 11, "november": 11, "dec": 12, "december": 12,
}


_MON = "(?:" + "|".join(sorted(MONTH_NUMBERS, key=len, reverse=True)) + ")"


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


GLUED_EXPIRY = re.compile(r"(?i)\b(exp|expiry|bud)\.?(?=\d)")  # EXP01JUL2015, Exp10/23/2015, Exp.04/2019


DATE_RANGE_GLUE = re.compile(r"(\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}/\d{4})-(?=\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}/\d{4})")


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
    month = MONTH_NUMBERS[groups["mon"].lower().rstrip(".")] if groups.get("mon") else (
        int(groups["m"]) if groups.get("m") else None)
    day = int(groups["d"]) if groups.get("d") else None
    year = int(groups["y"]) if groups.get("y") else None
    if year is not None and len(groups["y"]) not in (2, 4):
        return None  # 10/31/217: a date (never a lot) whose value we cannot read
    return _iso(year, month, day)


def mask_dates(text: str) -> tuple[str, list[str | None]]:
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


def spoken_date(value) -> str:
    """A recall window's date as people read it, in the active language, as precise as written: '2018-07' ->
    'July 2018' ('julio de 2018'), '2019-03-04' -> 'March 4, 2019', '2019' -> '2019' (letters, the pack check)."""
    text = str(value or "")
    parts = text.split("-")
    try:
        if len(parts) == 1 and len(text) == 4:
            return text
        month = str(MONTHS[int(parts[1])])
        if len(parts) > 2:
            return _("%(month)s %(day)s, %(year)s") % {"month": month, "day": int(parts[2]), "year": parts[0]}
        return _("%(month)s %(year)s") % {"month": month, "year": parts[0]}
    except (ValueError, IndexError, KeyError):
        return text
