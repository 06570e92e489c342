"""Request and response bodies of API v1. The OpenAPI document (docs/openapi.json) is generated
from these; schemathesis checks the live app against it."""

import re
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Annotated, Literal
from uuid import UUID

from ninja import Schema
from pydantic import ConfigDict, Field, PlainValidator, WithJsonSchema, model_validator

from patients.csvimport import MAX_PRODUCT_TEXT

Verdict = Literal["safe", "caution", "stop", "unknown"]

# PostgreSQL text cannot hold NUL: api.guard refuses it in any URL or body (400) before a schema is
# read; the pattern says so in the OpenAPI document.
NO_NUL = r"^[^\u0000]*$"

# --- instants ---------------------------------------------------------------------------------------
# Every timestamp the API reads (query `at`, body `dispensed_at`, FHIR whenHandedOver, the MCP replay
# tool) goes through parse_instant: an RFC 3339 date-time with a zone, returned in UTC, that Python and
# PostgreSQL can both hold. Anything else is a 422, never a guess (a bare number is not 1970) and never
# a database error (PostgreSQL refuses offsets beyond 15:59, Python years outside 1..9999).

INSTANT_RULE = ("An RFC 3339 date-time with a zone (Z or +hh:mm/-hh:mm), e.g. 2026-12-01T10:00:00Z; years 1 to "
                "9999 in UTC. In a URL, write + as %2B.")
_RFC3339 = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
                      r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))")


def parse_instant(value) -> datetime:
    """The aware UTC datetime of an RFC 3339 date-time with a zone; ValueError saying why not."""
    if isinstance(value, datetime):  # from Python callers; a JSON or URL value is always a string
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"Needs a time zone. {INSTANT_RULE}")
        return value.astimezone(UTC)
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"Not a date-time with a zone. {INSTANT_RULE}")
    year, month, day, hour, minute, second = (int(part) for part in match.group(1, 2, 3, 4, 5, 6))
    fraction, sign, offset_hours, offset_minutes = match.group(7, 8, 9, 10)
    if second == 60:
        raise ValueError("A leap second (:60) cannot be stored; use :59.")
    zone = UTC
    if sign:
        if int(offset_hours) > 23 or int(offset_minutes) > 59:
            raise ValueError(f"The zone offset {sign}{offset_hours}:{offset_minutes} is out of range. {INSTANT_RULE}")
        offset = timedelta(hours=int(offset_hours), minutes=int(offset_minutes))
        zone = timezone(-offset if sign == "-" else offset)
    try:
        local = datetime(year, month, day, hour, minute, second, int((fraction or "0")[:6].ljust(6, "0")),
                         tzinfo=zone)
        return local.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"No such instant. {INSTANT_RULE}") from None


Instant = Annotated[datetime, PlainValidator(parse_instant),
                    WithJsonSchema({"type": "string", "format": "date-time", "description": INSTANT_RULE})]


def parse_day(value) -> date:
    """An RFC 3339 full-date (YYYY-MM-DD); ValueError otherwise (a number is not a day since 1970)."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError("Not a date: send YYYY-MM-DD, e.g. 2027-06-30.")


Day = Annotated[date, PlainValidator(parse_day), WithJsonSchema({"type": "string", "format": "date"})]


class Strict(Schema):
    model_config = ConfigDict(extra="forbid")


# --- requests ---------------------------------------------------------------------------------------

class AskIn(Strict):
    question: str = Field(min_length=1, max_length=1000, pattern=r"^[^\u0000]*[^\s\u0000][^\u0000]*$",
                          examples=["Is my valsartan safe?"])
    subject: str | None = Field(None, min_length=1, max_length=200, pattern=NO_NUL,
                                description="The medicine; default: from the question.")
    patient: str | None = Field(None, min_length=1, max_length=64, pattern=NO_NUL, description=(
        "Pharmacy keys: the patient's external reference or public id (required). Patient-bound keys: omit "
        "(the key's own patient is used; naming another is refused)."))


class CheckIn(Strict):
    """Exactly one of decision_id or decision_ids (a value for each, or neither, is a 422)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"oneOf": [
        {"required": ["decision_id"], "properties": {"decision_id": {"type": "string"}}},
        {"required": ["decision_ids"], "properties": {"decision_ids": {"type": "array"}}},
    ]})

    decision_id: UUID | None = None
    decision_ids: list[UUID] | None = Field(None, min_length=1, max_length=100)

    @model_validator(mode="after")
    def one_of(self):
        if (self.decision_id is None) == (self.decision_ids is None):
            raise ValueError("Send exactly one of decision_id or decision_ids.")
        return self

    @property
    def ids(self) -> list[UUID]:
        return [self.decision_id] if self.decision_id else list(self.decision_ids or [])


class DispensingIn(Strict):
    patient: str | None = Field(None, min_length=1, max_length=64, pattern=NO_NUL, description=(
        "The patient's external reference or public id, one of the key's client's patients. Required: only "
        "pharmacy keys record dispensing (403 for other keys) and they must name the patient (422 without)."))
    drug: str = Field("", max_length=MAX_PRODUCT_TEXT, pattern=NO_NUL,
                      description="Generic or brand name as on the label; may be empty if product_description "
                                  "names it. Kept in full.")
    product_description: str = Field("", max_length=MAX_PRODUCT_TEXT, pattern=NO_NUL,
                                     description="The product as described on the pack or in the pharmacy "
                                                 "system; kept in full (real names run to thousands of characters).")
    ndc: str = Field("", max_length=20, pattern=NO_NUL, description="Package NDC, 10-digit hyphenated or 11-digit.")
    lot: str = Field(min_length=1, max_length=100, pattern=NO_NUL)
    expiry: Day | None = None
    quantity: int = Field(ge=1, le=1_000_000)
    dispensed_at: Instant
    site: str = Field("", max_length=200, pattern=NO_NUL)


# --- responses --------------------------------------------------------------------------------------

class Problem(Schema):
    """RFC 9457 problem details (application/problem+json)."""

    type: str
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[dict] | None = None


# The problem responses an endpoint documents: any body-taking endpoint, and any GET.
ERRORS = {code: Problem for code in (400, 401, 403, 404, 413, 415, 422, 429)}
GET_ERRORS = {code: Problem for code in (400, 401, 403, 404, 422, 429)}


# --- FHIR (application/fhir+json or application/json, api/fhir_media.py) ----------------------------

class OutcomeIssue(Schema):
    severity: Literal["fatal", "error", "warning", "information"]
    code: str
    details: dict | None = None
    diagnostics: str | None = None


class OperationOutcome(Schema):
    """A FHIR R4 OperationOutcome: every refusal of a FHIR endpoint, and a recorded MedicationDispense when
    the client asks for application/fhir+json."""

    resourceType: Literal["OperationOutcome"]
    issue: list[OutcomeIssue]


class FhirResource(Schema):
    """A FHIR R4 resource (Bundle, CommunicationRequest, Communication), validated with fhir.resources."""

    model_config = ConfigDict(extra="allow")
    resourceType: str


FHIR_ERRORS = {code: OperationOutcome for code in (400, 401, 403, 404, 406, 413, 415, 422, 429)}
FHIR_GET_ERRORS = {code: OperationOutcome for code in (400, 401, 403, 404, 406, 422, 429)}


class DecisionRef(Schema):
    id: UUID
    verdict: Verdict
    status: Literal["standing", "superseded"]
    decided_at: datetime


class FactRef(Schema):
    fact_key: str
    version: int
    statement: str
    asserted_at: datetime
    retracted_at: datetime | None


class ReadOut(Schema):
    rank: int
    fact_key: str
    version: int
    load_bearing: bool
    score: float
    kind: str
    statement: str
    believed_now: bool
    retracted_at: datetime | None


class InputOut(Schema):
    dispensing_id: int
    fingerprint: str
    unchanged: bool = Field(description="The dispensing row still has the fingerprint it had at decision time.")


class CorrectionOut(Schema):
    id: UUID
    kind: Literal["correction", "notice"]
    status: Literal["draft", "approved", "rejected", "stale", "sent"]
    old_verdict: str
    new_verdict: str
    recall_number: str
    classification: str
    changed_fact: FactRef | None
    previous_fact: FactRef | None
    diff: list[dict]
    new_decision: UUID | None
    text: str | None = Field(description="The message, once a pharmacist approved it; null while a draft.")
    created: datetime


class DecisionOut(Schema):
    id: UUID
    patient: str | None
    question: str
    subject: str
    verdict: Verdict
    answer: str
    reasoner: str
    guardrail_override: str
    status: Literal["standing", "superseded"]
    decided_at: datetime
    superseded_at: datetime | None
    replaces: UUID | None
    superseded_by: DecisionRef | None
    current: DecisionRef = Field(description="The decision standing now in this one's chain (itself if standing).")
    reads: list[ReadOut]
    premises: list[str] = Field(description="Scopes whose believed facts the decision took into account.")
    inputs: list[InputOut]
    corrections: list[CorrectionOut]


class AskOut(DecisionOut):
    """The decision about the first medicine the question names, and every decision the question made."""

    decisions: list[DecisionOut] = Field(description=(
        "One decision per medicine the question names, in the order named (a question about two medicines, "
        "\"my losartan and my atorvastatin\", is two decisions); the first is the one above."))


class ChangeOut(Schema):
    kind: Literal["retracted_read", "new_fact", "dispensing_changed"]
    read: FactRef | None = Field(description="The version the decision read (retracted_read).")
    now: FactRef | None = Field(description="The version believed now, or the new fact.")
    reason: str
    dispensing_id: int | None = None


class CheckResult(Schema):
    id: UUID
    standing: bool
    state: Literal["standing", "stale", "superseded"] = Field(description=(
        "standing: nothing it rests on changed; stale: something changed and re-decision is pending; "
        "superseded: re-decided (see current)."))
    verdict: Verdict
    changes: list[ChangeOut]
    current: DecisionRef | None
    current_verdict: Verdict
    corrections: list[CorrectionOut]


class CheckOut(Schema):
    results: list[CheckResult]


class ReadSetItem(Schema):
    fact_key: str
    version: int
    load_bearing: bool


class ReplayOut(Schema):
    decision: UUID
    at: datetime
    decided_at: datetime
    route: Literal["bitemporal"]
    read_set: list[ReadSetItem]
    believed: list[FactRef] = Field(description="Versions of the read keys believed at `at`.")


class DispensingOut(Schema):
    id: int
    patient: str
    drug: str
    lot: str
    ndc: str
    quantity: int
    dispensed_at: datetime
    recall_warning: str


class ExposedDispensing(Schema):
    id: int
    drug: str
    lot: str
    ndc: str
    dispensed_at: datetime


class ExposedPatient(Schema):
    patient: str
    match: Literal["lot", "drug"]
    why: str
    fact_key: str
    fact_version: int
    dispensings: list[ExposedDispensing]


class ExposureOut(Schema):
    recall_number: str
    patients: list[ExposedPatient]


# --- check my pack (GET /check, no key) -------------------------------------------------------------

PackOutcome = Literal["recalled", "may_be_recalled", "lot_needed", "not_listed", "unidentified"]


class PackRecallOut(Schema):
    number: str = Field(description="FDA recall number, e.g. D-0315-2019.")
    classification: str = Field(description="Class I, Class II or Class III (\"\" when FDA gave none).")
    status: str = Field(description="FDA's status: Ongoing, Terminated, Completed.")
    product: str
    reason: str = Field(description="The FDA's reason, as the FDA wrote it (English).")
    covers: str = Field(description="What the recall covers, in words: 'lot 3061169', 'every lot', ...")
    lots: list[str] = Field(description="The recalled lots, printed; empty for a recall of every lot.")
    match: str = Field(description="How the recall reaches the pack: confirmed, probable, product_all_lots, "
                                   "candidate; \"\" when it does not (another lot).")
    rule: str = Field(description="The matching rule, for a pharmacist.")


class PackCheckOut(Schema):
    outcome: PackOutcome = Field(description=(
        "recalled: the recall's own product and lot, or its product on a recall of every lot; may_be_recalled: "
        "a lot that may be the recalled one (near miss, read with doubt) or a product only openFDA lists: a "
        "pharmacist checks the pack; lot_needed: the product has recalls of some lots and no lot was given; "
        "not_listed: the product is on recalls we know of, none covers this lot (never 'safe'); unidentified: "
        "no recall we know of names the product, so nothing is said of it."))
    headline: str = Field(description="One line for people, in the language of Accept-Language (en or es).")
    what_to_do: str
    ndc: str = Field(description="The NDC-11 (5-4-2) the pack was identified as; \"\" when unidentified.")
    lot: str = Field(description="The lot as read, printed.")
    lot_reading: str = Field(description="How the lot field was read, when it held more than a lot.")
    classification: str = Field(description="Class of the most serious recall reaching the pack.")
    recalls: list[PackRecallOut]
    ambiguous: list[str] = Field(description="NDCs the code can be when several are products we know of.")
