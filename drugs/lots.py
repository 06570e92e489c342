"""Lot numbers: as a recall prints them, and the one key every comparison uses.

    printed_lot(raw) -> 'M331J18-1'      the lot as printed, tidied: what recall facts name and show
    canonical_lot(raw) -> 'M331J181'     what two lots are compared by (dispensing rows store it)
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

_LOT_PREFIX = re.compile(r"^(?:LOT|LOTS|BATCH)\s*(?:NO\.?|NUMBER|NUMBERS|#|:)*\s*", re.IGNORECASE)
_NOT_LOT = re.compile(r"[^A-Z0-9]")
# A short trailing part after a separator ("M331J18-1", "4L67C035 A"): packs are often labelled
# without it, so a dispensing typed without it is a near miss of the recalled lot.
_SUFFIX = re.compile(r"^(?P<base>.*[A-Z0-9])[-\s./](?P<suffix>[A-Z0-9]{1,2})$")
# Read-alike characters, folded in the near key only (letter -> digit).
_READ_ALIKE = str.maketrans({"O": "0", "I": "1"})


def _unprefixed(raw) -> str:
    if raw is None:
        return ""
    return _LOT_PREFIX.sub("", str(raw).strip())


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


def near_lot_key(raw: str) -> str:
    """The canonical lot with O read as 0, I as 1, and leading zeros dropped ('04L67C0O35' ->
    '4L67C0035'). Equal near keys are a near miss worth a pharmacist's look, never a match alone."""
    key = canonical_lot(raw).translate(_READ_ALIKE).lstrip("0")
    return key or canonical_lot(raw)


def _suffix_dropped(printed: str) -> str:
    found = _SUFFIX.match(printed_lot(printed) if printed else "")
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
