"""Windows and "all lots" in recall text with its dates masked: an expiry window ("all lots within
expiry", "expiration dates between A and B"), a dispensing/distribution window and a manufacturing
window."""

from __future__ import annotations

import re

_D = r"\x01(\d+)\x02"


ALL_LOTS = re.compile(
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


LOT_DATE_RANGE = re.compile(rf"(?i)\blots?\b\s*(?:#|no\.?|numbers?)?\s*:?\s*{_D}\s*(?:to|through|thru|-)\s*{_D}")


_WINDOW_CONTINUED = re.compile(rf"\s*(?:and|,|;)\s*{_D}\s*(?:to|through|thru|-)\s*{_D}")


_DISPENSED_WINDOW = re.compile(
    rf"(?i)\b(?:distributed|dispensed|filled|sold|shipped|stored\s+and\s+distributed)\s+(?:[A-Za-z]+\s+){{0,3}}?"
    rf"(?:between\s+|from\s+)?{_D}\s*(?:and|to|through|thru|-)\s*{_D}")


def _span(windows: list) -> tuple[str | None, str | None] | None:
    """Several written windows as one that covers them all (over-notify rather than under-notify)."""
    if not windows:
        return None
    starts = [w[0] for w in windows if w[0]]
    ends = [w[1] for w in windows if w[1]]
    return (min(starts) if starts else None, max(ends) if ends else None)


def window_of(match: re.Match, values: list[str | None]) -> tuple[str | None, str | None]:
    return values[int(match.group(1))], values[int(match.group(2))]


def written_windows(masked: str, values: list[str | None], low: str) -> dict:
    """Windows written in the text. Each pattern runs only when its key word occurs (long lot lists
    have none, and these patterns are the slow part of a 200,000-character text)."""
    found = {"expiry_window": None, "dispensed_window": None, "manufactured_window": None}
    rest = masked
    if any(word in low for word in ("manufactured", "made", "produced", "prepared", "compounded", "packaged")):
        for match in _MANUFACTURED_WINDOW.finditer(masked):
            found["manufactured_window"] = found["manufactured_window"] or window_of(match, values)
            rest = rest.replace(match.group(), " ")
    # "Distributed Before 8/5/15", "distributed prior to and including 05/23/2013" are not read as windows:
    # the date bounds the firm's distribution, and a pharmacy can dispense a pack after it (the window
    # would exclude exposed patients).
    if any(word in low for word in ("distributed", "dispensed", "filled", "sold", "shipped")):
        spans = []
        for match in _DISPENSED_WINDOW.finditer(rest):
            spans.append(window_of(match, values))
            # "dispensed on 08/26-29/2019 and 09/27/2019 through 10/03/2019": one window over both spans
            for more in _WINDOW_CONTINUED.finditer(rest, match.end()):
                if more.start() != match.end():
                    break
                spans.append(window_of(more, values))
                break
        found["dispensed_window"] = _span(spans)
    if "exp" in low or "bud" in low or "use by" in low or "beyond use" in low:
        spans = []
        for match in _EXPIRY_WINDOW.finditer(masked) if _A_DATE_RANGE.search(masked) else ():
            spans.append(window_of(match, values))
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
