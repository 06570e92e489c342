"""Lot numbers as printed and as recalls name them, compared only after `normalize_lot`."""

import re

_LOT_PREFIX = re.compile(r"^(?:LOT|LOTS|BATCH)\s*(?:NO\.?|NUMBER|NUMBERS|#|:)*\s*", re.IGNORECASE)


def normalize_lot(raw: str) -> str:
    """'Lot # b70130 ' -> 'B70130'; keeps hyphens inside lots ('22165-003'), drops spaces and stray punctuation."""
    if raw is None:
        return ""
    text = _LOT_PREFIX.sub("", str(raw).strip())
    text = re.sub(r"\s+", "", text.upper())
    text = re.sub(r"[^A-Z0-9\-/.]", "", text)
    return text.strip("-/.")
