"""Reading one field of an openFDA record: text PostgreSQL can store, bounded where it is copied into
every fact, dates as openFDA writes them, and the hash of the fields whose change means the recall
changed. A field that cannot be read raises Malformed, whose message is the quarantine reason
(recalls.quarantine)."""

import hashlib
import json
import re
from datetime import UTC, date, datetime

from .lots.scope import LOT_SCOPE_VERSION

# Free text copied into every fact of a record, bounded at several times the longest in real data
# (reason 729, product 4,000 - openFDA's own cap -, distribution 713, firm 81 characters). Longer is
# kept truncated and flagged (attributes["text_flag"]), never a reason to lose the record.
TEXT_LIMITS = {"reason_for_recall": 4000, "product_description": 8000, "distribution_pattern": 4000,
               "recalling_firm": 500, "event_id": 40}
# Fields whose change means the recall changed. `openfda` (re-harmonised by FDA all the time),
# address lines, voluntary_mandated wording and center_classification_date are deliberately out.
HASHED_FIELDS = ("recall_number", "event_id", "classification", "status", "reason_for_recall", "recalling_firm",
                 "product_description", "distribution_pattern", "report_date", "recall_initiation_date",
                 "termination_date", "code_info", "more_code_info")


class Malformed(ValueError):
    """A record that cannot become facts; the message is the quarantine reason."""



_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")




def unstorable_text(value: str) -> str | None:
    """Why PostgreSQL would refuse this text (NUL in text/jsonb, a lone UTF-16 surrogate in UTF-8), or None."""
    if "\x00" in value:
        return "a NUL character"
    if _LONE_SURROGATE.search(value):
        return "a lone surrogate (not valid Unicode)"
    return None


def check_storable(value, where: str = "record", *, depth: int = 0) -> None:
    """Raise Malformed naming the first field (any depth, keys included) PostgreSQL could not store."""
    if depth > 20:
        raise Malformed(f"{where} is nested more than 20 levels deep")
    if isinstance(value, str):
        problem = unstorable_text(value)
        if problem:
            raise Malformed(f"{where} contains {problem}")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_storable(str(key), f"a field name in {where}", depth=depth + 1)
            check_storable(item, f"{where}.{key}" if where != "record" else str(key), depth=depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_storable(item, f"{where}[{index}]", depth=depth + 1)


def storable(value, *, depth: int = 0):
    """A copy of any JSON-ish value that jsonb accepts whatever came in: NULs and lone surrogates become
    U+FFFD, non-JSON values their repr, deep nesting is cut. For keeping a bad record verbatim-ish."""
    if depth > 20:
        return "<nested too deep>"
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value.replace("\x00", "\ufffd"))
    if isinstance(value, dict):
        return {storable(str(k), depth=depth + 1): storable(v, depth=depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(v, depth=depth + 1) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return storable(repr(value), depth=depth + 1)


def text_field(record: dict, name: str, *, required: bool = False) -> str:
    value = record.get(name)
    if value is None:
        if required:
            raise Malformed(f"missing {name}")
        return ""
    if isinstance(value, (int,)) and not isinstance(value, bool) and name == "event_id":
        return str(value)
    if not isinstance(value, str):
        raise Malformed(f"{name} should be text, got {type(value).__name__}: {json.dumps(value)[:80]}")
    problem = unstorable_text(value)
    if problem:
        raise Malformed(f"{name} contains {problem}")
    value = value.strip()
    if required and not value:
        raise Malformed(f"missing {name}")
    return value


OPENFDA_YEARS = range(1900, 2101)


def bounded_text(record: dict, name: str, cut: list[str], *, required: bool = False) -> str:
    """text_field, at most TEXT_LIMITS[name] characters: a longer value is cut, and `cut` says so."""
    value, limit = text_field(record, name, required=required), TEXT_LIMITS[name]
    if len(value) <= limit:
        return value
    cut.append(f"{name} is {len(value):,} characters; the first {limit - 1:,} are kept")
    return value[: limit - 1].rstrip() + "…"


def parse_openfda_date(value: str, name: str) -> date | None:
    if not value:
        return None
    # strptime alone is lenient ("201911" parses as 2019-01-01): insist on exactly eight digits.
    if not (len(value) == 8 and value.isascii() and value.isdigit()):
        raise Malformed(f"{name} {value[:40]!r} is not a YYYYMMDD date")
    try:
        day = datetime.strptime(value, "%Y%m%d").date()
    except ValueError:
        raise Malformed(f"{name} {value!r} is not a YYYYMMDD date") from None
    if day.year not in OPENFDA_YEARS:
        raise Malformed(f"{name} {value!r} is outside {OPENFDA_YEARS.start}..{OPENFDA_YEARS.stop - 1}")
    return day


def midnight(day: date | None) -> datetime | None:
    return datetime(day.year, day.month, day.day, tzinfo=UTC) if day else None


def record_hash(record: dict) -> str:
    """Hash of the fields that feed the facts; null and "" are the same (more_code_info flips between them)."""
    content = {name: (record.get(name) or "") for name in HASHED_FIELDS}
    content["lot_scope_parser"] = LOT_SCOPE_VERSION  # a new parser re-reads every record once (facts decide)
    if isinstance(content["event_id"], int):
        content["event_id"] = str(content["event_id"])
    for name, value in content.items():
        if isinstance(value, str):
            content[name] = value.strip()
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def text_items(value) -> list[str]:
    """The strings of an openFDA list field; anything else in it (an integer NDC, a nested list) is
    ignored rather than crashing the chunk: these fields only add NDCs, never decide a recall."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str)]
