"""The recall text as openFDA wrote it, made whole: `code_info` and `more_code_info` joined where openFDA
cut them, and the spaces its re-wrap inserts about every 4,000 characters taken out of split tokens."""

from __future__ import annotations

import re
from collections import Counter

OPENFDA_CUT = 32600  # openFDA stores at most this many characters of code_info, the rest in more_code_info


TRUNCATED_AT = 30000  # a code_info this long was cut by openFDA


REWRAP_EVERY = 4000  # openFDA re-wraps long text, inserting a space about every 4,000 characters


SEAM = "\u2063"  # marks where openFDA split a token; kept inside tokens, removed from lots


def join_fields(code_info: str, more: str) -> tuple[str, bool, bool]:
    """(text, truncated, cut_at_end): openFDA cuts code_info at 32,600 characters and (sometimes) continues
    in more_code_info mid-token; a code_info of exactly the cut length ends inside a token."""
    truncated = len(code_info) >= TRUNCATED_AT
    if not more:
        return code_info, truncated, truncated and len(code_info) >= OPENFDA_CUT - 1 and code_info[-1:].isalnum()
    if truncated and len(code_info) >= OPENFDA_CUT and code_info[-1:].isalnum() and more[:1].isalnum():
        return code_info + SEAM + more, truncated, False
    return f"{code_info} {more}", truncated, False


_WORDISH = re.compile(r"[A-Za-z0-9]+")


_SHAPE_TABLE = str.maketrans("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                             "9" * 10 + "A" * 52)


def _shape(token: str) -> str:
    return token.translate(_SHAPE_TABLE)


def unwrap(text: str) -> str:
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
        pieces.append(SEAM)
        last = p + 1
    pieces.append(text[last:])
    return "".join(pieces)
