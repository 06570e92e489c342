"""openFDA records -> claims (pure functions: no database, no network).

One enforcement record becomes one fact per (recall, lot) when its code_info names lots, else one
drug-level fact that says every lot is treated as affected (over-notify rather than under-notify).
See docs/facts.md for the contract.
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from memory.services import Claim

from .lots import extract_lots, mentions_all_lots
from .normalize import normalize_drug_name, normalize_ndc, normalize_product_ndc

ENFORCEMENT_SOURCE = "openfda:enforcement"
LABEL_SOURCE = "openfda:label"
ESCALATION_SOURCE = "demo:escalation"
CLASSIFICATIONS = ("Class I", "Class II", "Class III")
STATUSES = ("Ongoing", "Completed", "Terminated", "Pending")
CODE_INFO_MAX = 2000
LABEL_SECTIONS = ("boxed_warning", "warnings")

# Fields whose change means the recall changed. `openfda` (re-harmonised by FDA all the time),
# address lines, voluntary_mandated wording and center_classification_date are deliberately out.
HASHED_FIELDS = ("recall_number", "event_id", "classification", "status", "reason_for_recall", "recalling_firm",
                 "product_description", "distribution_pattern", "report_date", "recall_initiation_date",
                 "termination_date", "code_info", "more_code_info")


class Malformed(ValueError):
    """A record that cannot become facts; the message is the quarantine reason."""


@dataclass
class RecallClaim(Claim):
    """A recall claim whose content hash leaves out the raw code_info text: each fact is about one
    lot (or the whole drug), so re-worded or extended code_info must not re-version the lots it
    still names. Lots added or dropped change the fact set instead."""

    UNHASHED_ATTRIBUTES = ("code_info",)

    def content_hash(self) -> str:
        base = Claim(**{name: getattr(self, name) for name in Claim.__dataclass_fields__})
        base.attributes = {k: v for k, v in self.attributes.items() if k not in self.UNHASHED_ATTRIBUTES}
        return base.content_hash()

    def embedding_text(self) -> str:
        """The statement with its lot number masked: every lot of one recall embeds as one text
        (17,685 facts of the 2023 part are 3,874 texts, so first ingest costs 4.6x fewer model
        calls). A lot number carries no meaning for the model; lots are matched exactly, never by
        vector (memory.services.retrieve puts the patient's lots first). The statement keeps the lot."""
        if self.lot:
            return self.statement.replace(f" lot {self.lot} by ", " lot by ", 1)
        return self.statement


@dataclass
class ParsedRecall:
    recall_number: str
    record_hash: str
    subject: str
    ndcs: list
    lots: list
    all_lots: bool
    attributes: dict
    valid_from: datetime
    valid_to: datetime | None
    product: str
    raw: dict = field(repr=False, default_factory=dict)

    @property
    def scope(self) -> str:
        return "lot" if self.lots and not self.all_lots else "drug"


def _text(record: dict, name: str, *, required: bool = False) -> str:
    value = record.get(name)
    if value is None:
        if required:
            raise Malformed(f"missing {name}")
        return ""
    if isinstance(value, (int,)) and not isinstance(value, bool) and name == "event_id":
        return str(value)
    if not isinstance(value, str):
        raise Malformed(f"{name} should be text, got {type(value).__name__}: {json.dumps(value)[:80]}")
    value = value.strip()
    if required and not value:
        raise Malformed(f"missing {name}")
    return value


def parse_openfda_date(value: str, name: str) -> date | None:
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y%m%d").date()
    except ValueError:
        raise Malformed(f"{name} {value!r} is not a YYYYMMDD date") from None


def _midnight(day: date | None) -> datetime | None:
    return datetime(day.year, day.month, day.day, tzinfo=UTC) if day else None


def record_hash(record: dict) -> str:
    """Hash of the fields that feed the facts; null and "" are the same (more_code_info flips between them)."""
    content = {name: (record.get(name) or "") for name in HASHED_FIELDS}
    if isinstance(content["event_id"], int):
        content["event_id"] = str(content["event_id"])
    for name, value in content.items():
        if isinstance(value, str):
            content[name] = value.strip()
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def ndcs_of(record: dict) -> list[str]:
    """Package NDCs (5-4-2) from openfda.package_ndc, else product NDCs, else NDCs written in the description."""
    openfda = record.get("openfda") or {}
    found = []
    for raw in openfda.get("package_ndc") or []:
        try:
            found.append(normalize_ndc(raw))
        except ValueError:
            continue
    if not found:
        for raw in openfda.get("product_ndc") or []:
            try:
                found.append(normalize_product_ndc(raw))
            except ValueError:
                continue
    if not found:
        description = record.get("product_description") or ""
        for raw in re.findall(r"(?<![\d-])(\d{4,5}-\d{3,4}-\d{1,2}|\d{11})(?![\d-])", description):
            try:
                found.append(normalize_ndc(raw))
            except ValueError:
                continue
    return sorted(set(found))


SUBJECT_MAX = 200  # memory.Fact.subject
LOT_MAX = 100  # memory.Fact.lot


def _clip_words(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0]


def subject_of(record: dict) -> str:
    openfda = record.get("openfda") or {}
    names = openfda.get("generic_name") or []
    if names and isinstance(names, list) and isinstance(names[0], str):
        subject = normalize_drug_name(names[0])
        if subject:
            return _clip_words(subject, SUBJECT_MAX)
    return _clip_words(normalize_drug_name(record.get("product_description") or ""), SUBJECT_MAX)


def short_product(description: str, limit: int = 140) -> str:
    text = " ".join(description.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def parse_enforcement(record) -> ParsedRecall:
    """Validate one enforcement record and derive what its facts need. Raises Malformed."""
    if not isinstance(record, dict):
        raise Malformed(f"record should be a JSON object, got {type(record).__name__}")
    recall_number = _text(record, "recall_number", required=True)
    classification = _text(record, "classification", required=True)
    if classification not in CLASSIFICATIONS:
        raise Malformed(f"classification {classification!r} is not one of {', '.join(CLASSIFICATIONS)}")
    status = _text(record, "status", required=True)
    if status not in STATUSES:
        raise Malformed(f"status {status!r} is not one of {', '.join(STATUSES)}")
    description = _text(record, "product_description", required=True)
    reason = _text(record, "reason_for_recall")
    firm = _text(record, "recalling_firm")
    event_id = _text(record, "event_id")
    distribution = _text(record, "distribution_pattern")
    code_info = _text(record, "code_info")
    more_code_info = _text(record, "more_code_info")
    openfda = record.get("openfda")
    if openfda is not None and not isinstance(openfda, dict):
        raise Malformed(f"openfda should be an object, got {type(openfda).__name__}")
    initiated = parse_openfda_date(_text(record, "recall_initiation_date", required=True), "recall_initiation_date")
    terminated = parse_openfda_date(_text(record, "termination_date"), "termination_date")
    reported = parse_openfda_date(_text(record, "report_date"), "report_date")
    if terminated and terminated < initiated:
        raise Malformed(f"termination_date {terminated} is before recall_initiation_date {initiated}")
    subject = subject_of(record)
    if not subject:
        raise Malformed("no drug name in openfda.generic_name or product_description")
    full_code_info = " ".join(part for part in (code_info, more_code_info) if part)
    lots = extract_lots(full_code_info)
    too_long = [lot for lot in lots if len(lot) > LOT_MAX]
    if too_long:
        raise Malformed(f"lot {too_long[0][:40]}… is longer than {LOT_MAX} characters")
    if len(recall_number) > 40:
        raise Malformed(f"recall_number {recall_number[:40]}… is longer than 40 characters")
    all_lots = mentions_all_lots(full_code_info)
    attributes = {
        "recall_number": recall_number,
        "event_id": event_id,
        "classification": classification,
        "status": status,
        "reason": reason,
        "firm": firm,
        "product_description": description,
        "distribution": distribution,
        "report_date": reported.isoformat() if reported else None,
        "recall_initiation_date": initiated.isoformat(),
        "termination_date": terminated.isoformat() if terminated else None,
        "code_info": full_code_info[:CODE_INFO_MAX],
    }
    return ParsedRecall(
        recall_number=recall_number, record_hash=record_hash(record), subject=subject, ndcs=ndcs_of(record),
        lots=lots, all_lots=all_lots, attributes=attributes, valid_from=_midnight(initiated),
        valid_to=_midnight(terminated), product=short_product(description), raw=record,
    )


def recall_statement(attributes: dict, lot: str | None, *, all_lots: bool = False) -> str:
    product = short_product(attributes.get("product_description") or "")
    if lot:
        what = f"{product} lot {lot}"
    elif all_lots:
        what = f"{product}, all lots (the recall covers every lot)"
    else:
        what = f"{product}, all lots (the recall names no lot number, so every lot is treated as affected)"
    reason = " ".join((attributes.get("reason") or "").split())
    if len(reason) > 400:
        reason = reason[:399].rstrip() + "…"
    firm = attributes.get("firm") or "an unnamed firm"
    return (f"{attributes['classification']} recall {attributes['recall_number']} ({attributes['status']}) "
            f"of {what} by {firm}: {reason}")


def recall_fact_key(recall_number: str, lot: str | None) -> str:
    return f"recall:{recall_number}:lot:{lot}" if lot else f"recall:{recall_number}:drug"


def recall_claims(parsed: ParsedRecall, *, subject: str, ndcs: list, source_ref: str = "",
                  asserted_by: str = "") -> list[RecallClaim]:
    scope = parsed.scope
    lots = parsed.lots if scope == "lot" else [None]
    claims = []
    for lot in lots:
        attributes = dict(parsed.attributes, scope=scope, ndcs=list(ndcs))
        claims.append(RecallClaim(
            fact_key=recall_fact_key(parsed.recall_number, lot), kind="recall", subject=subject, lot=lot,
            statement=recall_statement(attributes, lot, all_lots=parsed.all_lots), source=ENFORCEMENT_SOURCE,
            attributes=attributes, source_ref=source_ref[:255], valid_from=parsed.valid_from,
            valid_to=parsed.valid_to, asserted_by=asserted_by,
        ))
    return claims


# --- labels ---------------------------------------------------------------------------------


def _joined(value) -> str:
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise Malformed("label section should be a list of text")
        return " ".join(" ".join(v.split()) for v in value).strip()
    if isinstance(value, str):
        return " ".join(value.split())
    raise Malformed(f"label section should be text, got {type(value).__name__}")


def label_claims(record, *, source_ref: str = "", asserted_by: str = "") -> tuple[str, int, list[Claim]]:
    """(set_id, version, claims) for one SPL label record: its boxed warning and warnings sections.
    PLR-format labels put warnings under `warnings_and_cautions`; that text is used for `warnings`
    when the label has no `warnings` section."""
    if not isinstance(record, dict):
        raise Malformed(f"record should be a JSON object, got {type(record).__name__}")
    set_id = _text(record, "set_id", required=True)
    label_id = _text(record, "id", required=True)
    try:
        version = int(_text(record, "version", required=True))
    except ValueError:
        raise Malformed(f"version {record.get('version')!r} is not a number") from None
    effective = parse_openfda_date(_text(record, "effective_time", required=True), "effective_time")
    openfda = record.get("openfda") or {}
    if not isinstance(openfda, dict):
        raise Malformed("openfda should be an object")
    brand = (openfda.get("brand_name") or [""])[0]
    generic = (openfda.get("generic_name") or [""])[0]
    subject = normalize_drug_name(generic) or normalize_drug_name(brand)
    if not subject:
        raise Malformed("label has no openfda generic_name or brand_name to name the drug")
    sections = {}
    if record.get("boxed_warning"):
        sections["boxed_warning"] = _joined(record["boxed_warning"])
    if record.get("warnings"):
        sections["warnings"] = _joined(record["warnings"])
    elif record.get("warnings_and_cautions"):
        sections["warnings"] = _joined(record["warnings_and_cautions"])
    claims = []
    for section, text in sections.items():
        if not text:
            continue
        title = "Boxed warning" if section == "boxed_warning" else "Warnings"
        name = f"{brand} ({generic})" if brand and generic and brand.lower() != generic.lower() else (brand or generic)
        statement = f"{title} on the {name} label (version {version}, effective {effective}): {text}"
        claims.append(Claim(
            fact_key=f"label:{set_id}:{section}", kind="label", subject=subject, lot=None,
            statement=statement[:6000], source=LABEL_SOURCE,
            attributes={"set_id": set_id, "label_id": label_id, "label_version": version,
                        "effective_time": effective.isoformat(), "section": section, "brand_name": brand},
            source_ref=source_ref[:255], valid_from=_midnight(effective), asserted_by=asserted_by,
        ))
    return set_id, version, claims
