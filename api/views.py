"""API v1 (django-ninja), mounted at /api/v1/. Thin: each endpoint calls one function of
api/services.py. The OpenAPI document is served at /api/v1/openapi.json, the docs page at
/api/v1/docs, and checked in as docs/openapi.json (`manage.py export_openapi`)."""

import json
import logging
from uuid import UUID

from ninja import NinjaAPI, Path, Query, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError

from api import epcis, fhir, fhir_media, pack_check, problems, services
from api.auth import ApiKeyAuth
from api.fhir_routes import router as fhir_out
from api.schemas import (
    ERRORS,
    FHIR_ERRORS,
    GET_ERRORS,
    INSTANT_RULE,
    AskIn,
    AskOut,
    CheckIn,
    CheckOut,
    DecisionOut,
    DispensingIn,
    DispensingOut,
    ExposureOut,
    Instant,
    OperationOutcome,
    PackCheckOut,
    Problem,
    ReplayOut,
)

log = logging.getLogger(__name__)

FHIR_TYPES = (fhir_media.FHIR_JSON, fhir_media.JSON)
RECALL_NUMBER = r"^[A-Z]-\d{4}-\d{4}$"
API_PREFIX = "/api/v1/"  # where unsay_site/urls.py mounts api.urls


class UnsayApi(NinjaAPI):
    def get_openapi_operation_id(self, operation) -> str:
        """Stable when this module moves: generated clients name their methods after these ids, which
        were memory_api_views_<view> when the API lived in the memory app."""
        return f"memory_api_views_{operation.view_func.__name__}"

    def get_openapi_schema(self, *args, **kwargs):
        """Error responses are application/problem+json (ninja writes application/json for all); the FHIR
        endpoints answer application/fhir+json or application/json, as Accept or _format asks."""
        schema = super().get_openapi_schema(*args, **kwargs)
        for name, path in schema["paths"].items():
            for operation in path.values():
                if "/fhir/" in name:
                    _document_fhir(operation)
                    continue
                for status, response in operation.get("responses", {}).items():
                    if int(status) >= 400 and "content" in response:
                        response["content"] = {problems.PROBLEM_CONTENT_TYPE: response["content"]["application/json"]}
        return schema


FORMAT_PARAMETER = {
    "in": "query", "name": "_format", "required": False,
    "schema": {"type": "string", "enum": ["json", fhir_media.JSON, fhir_media.FHIR_JSON]},
    "description": "Overrides Accept (FHIR R4): json or application/fhir+json answer application/fhir+json, "
                   "application/json answers application/json; anything else is a 406.",
}


def _document_fhir(operation: dict) -> None:
    """Both JSON types for every answer (the body is the same; the label is the one asked for), except a
    recorded MedicationDispense: its receipt as application/json, an OperationOutcome as application/fhir+json."""
    outcome = {"schema": {"$ref": "#/components/schemas/OperationOutcome"}}
    for status, response in operation.get("responses", {}).items():
        if "content" not in response:
            continue
        content = response["content"]["application/json"]
        if int(status) == 201:
            response["content"] = {fhir_media.JSON: content, fhir_media.FHIR_JSON: outcome}
        else:
            response["content"] = {fhir_media.FHIR_JSON: content, fhir_media.JSON: content}
    operation.setdefault("parameters", []).append(FORMAT_PARAMETER)


api = UnsayApi(
    title="Unsay API", version="1.0.0", urls_namespace="api_v1", auth=ApiKeyAuth(),
    description=("Medication-safety decisions with provenance: ask, read a decision and what it rests on, "
                 "check whether it still stands, replay what was believed then, record dispensing. "
                 "Errors are RFC 9457 problem details. See docs/api.md."),
)

# --- errors -----------------------------------------------------------------------------------------

def _refuse(request, problem: problems.Problem):
    """A problem details response, or under /api/v1/fhir/ an OperationOutcome (api/fhir_media.py)."""
    if fhir_media.is_fhir(request):
        return fhir_media.refusal(request, problem)
    return problem.response(instance=request.path)


@api.exception_handler(problems.Problem)
def _problem(request, exc: problems.Problem):
    return _refuse(request, exc)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    return _refuse(request, problems.unauthenticated())


def _error_item(error: dict) -> dict:
    loc = [str(p) for p in error.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path"):
        loc = loc[1:]  # where ninja found it
        if loc and loc[0] == "payload":  # the endpoint's argument name, not a field of the body
            loc = loc[1:]
    return {"field": ".".join(loc), "message": str(error.get("msg", ""))}


@api.exception_handler(ValidationError)
def _invalid(request, exc: ValidationError):
    errors = [_error_item(e) for e in exc.errors[:20]]
    return _refuse(request, problems.invalid("The request does not match the schema.", errors=errors))


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    return _refuse(request, problems.Problem(exc.status_code, "http-error", str(exc)))


@api.exception_handler(Exception)
def _unexpected(request, exc):
    log.exception("API request %s %s failed", request.method, request.path)
    return _refuse(request, problems.SERVER_ERROR)


# --- endpoints ---------------------------------------------------------------------------------------

@api.post("/ask", response={200: AskOut, **ERRORS}, summary="Ask whether a medicine is safe")
def ask(request, payload: AskIn):
    """A decision for a patient and question; a question naming several medicines gets one decision per
    medicine (`decisions`), the first also at the top level. A patient-bound key asks for its own patient
    only; a pharmacy key must name the patient (`patient`), or the request is a 422.
    Model calls (UNSAY_REASONER=bedrock) count against the daily and per-client caps."""
    return services.ask_each(request.auth, payload.question, subject=payload.subject, patient_ref=payload.patient)


@api.get("/decisions/{decision_id}", response={200: DecisionOut, **GET_ERRORS}, summary="A decision in full")
def get_decision(request, decision_id: Path[UUID]):
    return services.decision_detail(services.visible_decision(request.auth, decision_id))


@api.post("/check", response={200: CheckOut, **ERRORS}, summary="Is this decision still standing?")
def check(request, payload: CheckIn):
    return {"results": services.check(request.auth, payload.ids)}


@api.get("/check", auth=None, response={200: PackCheckOut, **GET_ERRORS}, summary="Check my pack: is it recalled?")
def check_my_pack(request,
                  ndc: str = Query("", max_length=pack_check.NDC_QUERY_MAX, description=pack_check.NDC_HELP),
                  lot: str = Query("", max_length=pack_check.LOT_QUERY_MAX, description=pack_check.LOT_HELP),
                  gs1: str = Query("", max_length=pack_check.GS1_QUERY_MAX, description=pack_check.GS1_HELP)):
    """Whether a pack is on an FDA recall we know of: give `ndc` (and `lot`), or `gs1` (a scanned barcode's
    text). No key (ADR 0014); at most UNSAY_CHECK_RATE_PER_MINUTE requests per client address per minute."""
    return pack_check.answer(request, ndc=ndc, lot=lot, gs1=gs1)


@api.get("/decisions/{decision_id}/replay", response={200: ReplayOut, **GET_ERRORS},
         summary="What we believed at an instant (bitemporal)")
def replay(request, decision_id: Path[UUID], at: Query[Instant | None] = None):
    """`at` defaults to when the decision was made; a future instant is a 422."""
    return services.replay(request.auth, decision_id, at)


def _dispensing_out(record, warning: str) -> dict:
    return {"id": record.pk, "patient": record.patient.external_ref, "drug": record.drug, "lot": record.lot,
            "ndc": record.ndc, "quantity": record.quantity, "dispensed_at": record.dispensed_at,
            "recall_warning": warning}


def _actor(request) -> str:
    return f"api:{request.auth.prefix}"


@api.post("/dispensing", response={201: DispensingOut, 409: Problem, **ERRORS}, summary="Record a dispensing")
def dispensing(request, payload: DispensingIn):
    """Validated as the admin form and the CSV import are, written by patients.dispensing.save_dispensing
    (so a standing answer that rested on the patient's dispensing is re-decided)."""
    record, warning = services.record_dispensing(request.auth, payload.model_dump(), actor=_actor(request))
    return Status(201, _dispensing_out(record, warning))


@api.post("/fhir/MedicationDispense", auth=ApiKeyAuth(body_types=FHIR_TYPES),
          response={201: DispensingOut, 409: OperationOutcome, **FHIR_ERRORS},
          summary="Record a FHIR R4 MedicationDispense",
          openapi_extra={"requestBody": {"required": True, "content": {
              media: {"schema": {
                  "type": "object", "required": ["resourceType", "status", "whenHandedOver"],
                  "properties": {"resourceType": {"const": "MedicationDispense"}, "status": {"const": "completed"},
                                 "whenHandedOver": {"type": "string", "format": "date-time",
                                                    "description": INSTANT_RULE}},
                  "description": (
                      "A FHIR R4 MedicationDispense (status completed) whose medicationReference points at a "
                      "contained Medication carrying batch.lotNumber; subject.reference Patient/<external "
                      "reference>. Text may not contain NUL characters.")}}
              for media in FHIR_TYPES}}})
def fhir_dispensing(request):
    """Answers the stored row as /dispensing does (application/json, the default), or, to a client that asks
    for application/fhir+json, an OperationOutcome saying what was recorded, the recall warning as a warning
    issue. Refusals are OperationOutcome."""
    media = fhir_media.negotiate(request, offered=(fhir_media.JSON, fhir_media.FHIR_JSON))
    fields = fhir.dispensing_fields(json.loads(request.body))
    record, warning = services.record_dispensing(request.auth, fields, actor=_actor(request))
    receipt = _dispensing_out(record, warning)
    if media == fhir_media.FHIR_JSON:
        return fhir_media.answer(fhir_media.recorded_outcome(receipt, warning), media, 201)
    return Status(201, receipt)


@api.get("/recalls/{recall_number}/exposure", response={200: ExposureOut, **GET_ERRORS},
         summary="Which of this client's patients received a recalled lot (pharmacist keys)")
def exposure(request, recall_number: str = Path(..., pattern=RECALL_NUMBER, max_length=40)):
    return services.recall_exposure(request.auth, recall_number)


def openapi_document() -> dict:
    """The document served at /api/v1/openapi.json, with the server prefix the app mounts it at."""
    return api.get_openapi_schema(path_prefix=API_PREFIX)


def unknown_route(request, rest=""):
    """Anything else under /api/v1/ answers a problem too (an OperationOutcome under /api/v1/fhir/), not
    Django's HTML 404 page."""
    return _refuse(request, problems.not_found("No such endpoint; see /api/v1/openapi.json."))


# POST /epcis has its own auth and schemas (shelf receiving; api/epcis.py).
api.add_router("", epcis.router)
# FHIR out (corrections as CommunicationRequest, sent messages as Communication; docs/fhir.md).
api.add_router("/fhir", fhir_out)
