"""Checks on text staff enter about patients and dispensing (forms and CSV alike).

Names, contact details and drug descriptions end up in letters and text messages to patients, in
the review queue and in the admin. Control characters (NUL breaks PostgreSQL; CR/LF split headers
and lines) and the Unicode bidirectional controls (a right-to-left override makes "evil.example/moc"
display as "com/elpmaxe.live", and reorders the text of a letter) have no place there, so they are
refused with the position and name of the character, never silently stripped.
"""

import unicodedata

from django.core.exceptions import ValidationError

# Unicode bidirectional formatting characters (UAX #9): embeddings, overrides, isolates, marks.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Line and paragraph separators split a line as CR/LF do.
LINE_BREAKERS = frozenset("\u2028\u2029\x85")


def forbidden_characters(value: str, *, allowed: str = "") -> list[tuple[int, str]]:
    """(position, character) of each control or bidi character in value, except those in `allowed`."""
    found = []
    for position, ch in enumerate(value or ""):
        if ch in allowed:
            continue
        # Cc: controls (NUL, CR, LF, ESC...); Cs: a lone surrogate, which is not text and cannot be stored.
        if ch in BIDI_CONTROLS or ch in LINE_BREAKERS or unicodedata.category(ch) in ("Cc", "Cs"):
            found.append((position, ch))
    return found


def describe(ch: str) -> str:
    fallback = "control character" if unicodedata.category(ch) == "Cc" else ""
    return f"U+{ord(ch):04X} {unicodedata.name(ch, fallback)}".rstrip()


def problem(value: str, *, allowed: str = "") -> str:
    """'' when value is clean, else a sentence naming the first offending character."""
    found = forbidden_characters(value, allowed=allowed)
    if not found:
        return ""
    position, ch = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    kind = ("a text-direction control" if ch in BIDI_CONTROLS
            else "a broken character (lone surrogate)" if unicodedata.category(ch) == "Cs" else "a control character")
    return (f"contains {kind}, {describe(ch)}, at character {position + 1}{more}; retype the value "
            "without it (it is invisible, and it would reach patient letters).")


def validate_plain_text(value):
    """Model field validator: no control or bidi characters."""
    if reason := problem(str(value)):
        raise ValidationError(f"This value {reason}", code="control_character")
