"""Lot numbers: as a recall prints them, and the one key every comparison uses.

    printed_lot(raw) -> 'M331J18-1'      the lot as printed, tidied: what recall facts name and show
    canonical_lot(raw) -> 'M331J181'     what two lots are compared by (dispensing rows store it)
    canonical_lot_sql(column)            the same key computed by the database (PostgreSQL and CockroachDB)
    near_lot_key(raw) -> 'M331J181'      the key of the near-miss rules below (never a match by itself)
    near_lot_keys(printed) -> {...}      the near keys a recall lot answers to (with its suffix dropped)
    near_miss_rule(recall_lot, dispensed_lot) -> 'leading zeros' | ... | None

A pharmacy types a lot as it reads it off the pack: `M331J18 1`, `4L67-C035`, `lot# 4l67c035`. The
canonical lot drops the "Lot/Lot#/Lot No./Batch" prefix, every space, hyphen, dot, slash and other
punctuation, and upper-cases the rest, on both sides. Near misses — a leading zero added or lost, the
letter O read as zero, I as one, a recall's "-1" style suffix left off — are not the same lot, but a
pharmacist should see them: with the same product they make a *probable* match that names its rule
(drugs.matching). A lot never matches on its own: lots are unique only within a manufacturer's product.
"""

import re

from django.db.models import Expression, F, Func, TextField, Value
from django.db.models.functions import Coalesce

_LOT_PREFIX = re.compile(r"^(?:LOT|LOTS|BATCH)\s*(?:NO\.?|NUMBER|NUMBERS|#|:)*\s*", re.IGNORECASE)
_NOT_LOT = re.compile(r"[^A-Z0-9]")
# A short trailing part after a separator ("M331J18-1", "4L67C035 A"): packs are often labelled
# without it, so a dispensing typed without it is a near miss of the recalled lot.
_SUFFIX = re.compile(r"^(?P<base>.*[A-Z0-9])[-\s./](?P<suffix>[A-Z0-9]{1,2})$")
# A repackager's date after the maker's lot ("B2110254-021423": RemedyRepack's lots in 53 real recalls): the pack
# or the pharmacy's record may carry the maker's lot alone.
_DATE_SUFFIX = re.compile(r"^(?P<base>.*[A-Z0-9])-(?P<suffix>\d{6}|\d{8})$")
# Read-alike characters, folded in the near key only (letter -> digit).
_READ_ALIKE = str.maketrans({"O": "0", "I": "1"})
# Letters of other alphabets drawn like Latin capitals or digits (a keyboard left in Cyrillic or Greek, a name
# pasted from a document): read as the character they look like, since a lot is read off the pack by eye.
# Dropped as "not A-Z or 0-9" they would cut the lot short ("РW05264" read as "W05264") and a recalled pack
# would match nothing. Only shapes that are the same letter in print (Unicode's confusables for these scripts).
CONFUSABLES = {
    # Cyrillic capitals and small letters
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X",
    "У": "Y", "Ѕ": "S", "І": "I", "Ј": "J", "Ԛ": "Q", "Ԝ": "W", "З": "3",
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y", "ѕ": "s", "і": "i", "ј": "j", "к": "k",
    "м": "m", "н": "h", "т": "t", "в": "b",
    # Greek capitals
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P",
    "Τ": "T", "Υ": "Y", "Χ": "X", "ο": "o",
}
_CONFUSABLE_TABLE = str.maketrans(CONFUSABLES)


def _unprefixed(raw) -> str:
    if raw is None:
        return ""
    return _LOT_PREFIX.sub("", str(raw).translate(_CONFUSABLE_TABLE).strip())


def printed_lot(raw: str) -> str:
    """'Lot # b70130 ' -> 'B70130'; keeps hyphens, dots and slashes inside lots ('22165-003'), as the
    recall printed them: the lot a recall fact names and shows (its fact key), never a comparison key."""
    text = re.sub(r"\s+", "", _unprefixed(raw).upper())
    text = re.sub(r"[^A-Z0-9\-/.]", "", text)
    return text.strip("-/.")


def canonical_lot(raw: str) -> str:
    """'Lot# 4l67-c035' -> '4L67C035'; 'M331J18 1' -> 'M331J181': prefix, spaces and punctuation
    dropped, upper case. Every reader compares lots by this key (dispensing rows store it as `lot`)."""
    return _NOT_LOT.sub("", _unprefixed(raw).upper())


# canonical_lot in SQL. Python's rules are the reference; the SQL spells each of them out so that both engines
# compute the same key whatever their collation or regex dialect (PostgreSQL's ARE, CockroachDB's RE2):
# - no \s (ASCII-only in PostgreSQL under the C collation and in RE2; Unicode in Python): the characters
#   Python counts as whitespace, written into the bracket;
# - no case-insensitive flag (locale-dependent in PostgreSQL): each prefix letter as [Xx];
# - only the prefix alternatives Python can take: its alternation takes the first that matches and the rest of
#   the prefix is optional, so LOTS and NUMBERS never win (LOT and NUMBER do, leaving the S). With them gone no
#   two readings of a prefix exist, so PostgreSQL's longest match and RE2's first match agree with Python;
# - no upper() (a Turkish collation upper-cases i to a dotted capital): Python's str.upper() spelt out as a
#   table, the ASCII letters plus the 17 other characters whose capital holds an ASCII letter ('ß' -> 'SS',
#   'ﬁ' -> 'FI', 'ı' -> 'I'); every other character is dropped by both, as not A-Z or 0-9.
_WHITESPACE = "".join(ch for ch in map(chr, range(0x3001)) if ch.isspace())
_SQL_LOT_PREFIX = (f"^[{_WHITESPACE}]*(?:[Ll][Oo][Tt]|[Bb][Aa][Tt][Cc][Hh])[{_WHITESPACE}]*"
                   r"(?:[Nn][Oo]\.?|[Nn][Uu][Mm][Bb][Ee][Rr]|#|:)*")
_UPPER_INTO_LETTERS = {"ß": "SS", "ﬀ": "FF", "ﬁ": "FI", "ﬂ": "FL", "ﬃ": "FFI", "ﬄ": "FFL", "ﬅ": "ST", "ﬆ": "ST"}
_UPPER_INTO_LETTER = dict(zip("abcdefghijklmnopqrstuvwxyzıŉſǰẖẗẘẙẚ", "ABCDEFGHIJKLMNOPQRSTUVWXYZINSJHTWYA",
                              strict=True))


def canonical_lot_sql(column: str | Expression) -> Func:
    """canonical_lot() of a text column (a field name or an expression), as a database expression: the key a
    query compares lots by ('Lot# 4l67-c035' -> '4L67C035'); NULL gives '' as None does."""
    text = F(column) if isinstance(column, str) else column
    text = Coalesce(text, Value(""), output_field=TextField())
    text = Func(text, Value("".join(CONFUSABLES)), Value("".join(CONFUSABLES.values())), function="translate",
                output_field=TextField())
    text = Func(text, Value(_SQL_LOT_PREFIX), Value(""), function="regexp_replace", output_field=TextField())
    for char, letters in _UPPER_INTO_LETTERS.items():
        text = Func(text, Value(char), Value(letters), function="replace", output_field=TextField())
    text = Func(text, Value("".join(_UPPER_INTO_LETTER)), Value("".join(_UPPER_INTO_LETTER.values())),
                function="translate", output_field=TextField())
    return Func(text, Value("[^A-Z0-9]"), Value(""), Value("g"), function="regexp_replace", output_field=TextField())


def near_lot_key(raw: str) -> str:
    """The canonical lot with O read as 0, I as 1, and leading zeros dropped ('04L67C0O35' ->
    '4L67C0035'). Equal near keys are a near miss worth a pharmacist's look, never a match alone."""
    key = canonical_lot(raw).translate(_READ_ALIKE).lstrip("0")
    return key or canonical_lot(raw)


def _suffix_dropped(printed: str) -> str:
    lot = printed_lot(printed) if printed else ""
    found = _SUFFIX.match(lot) or _DATE_SUFFIX.match(lot)
    if not found or len(canonical_lot(found.group("base"))) < 4:
        return ""  # a base of 1-3 characters is too short to stand for a lot
    return found.group("base")


def near_lot_keys(printed: str) -> set[str]:
    """The near keys a recall lot answers to: its own, and its own with a short suffix dropped."""
    keys = {near_lot_key(printed)} - {""}
    base = _suffix_dropped(printed)
    if base:
        keys.add(near_lot_key(base))
    return keys


def near_miss_rule(recall_lot: str, dispensed_lot: str) -> str | None:
    """Why a dispensed lot is a near miss of a recall's lot, or None (equal lots are not a near miss,
    and neither are unrelated ones): the recall's short suffix left off, leading zeros, the letter O
    read as zero or I as one (or the reverse), or a suffix left off as well as one of those."""
    recall, dispensed = canonical_lot(recall_lot), canonical_lot(dispensed_lot)
    if not recall or not dispensed or recall == dispensed:
        return None
    shown = f"({printed_lot(recall_lot)} entered as {dispensed})"
    base = canonical_lot(_suffix_dropped(recall_lot))
    if base and base == dispensed:
        return f"the recall's suffix left off {shown}"
    for candidate in [recall] + ([base] if base else []):
        if near_lot_key(candidate) != near_lot_key(dispensed):
            continue
        rule = "leading zeros" if candidate.lstrip("0") == dispensed.lstrip("0") else "O/0 or I/1 read alike"
        return f"{rule}{', suffix left off' if candidate != recall else ''} {shown}"
    return None
