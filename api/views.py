"""API v1 (django-ninja), mounted at /api/v1/. Thin: each endpoint calls one function of
api/services.py. The OpenAPI document is served at /api/v1/openapi.json, the docs page at
/api/v1/docs, and checked in as docs/openapi.json (`manage.py export_openapi`)."""

import json
import logging
from uuid import UUID

from ninja import NinjaAPI, Path, Query, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError

from api import epcis, fhir, problems, services
from api.auth import ApiKeyAuth
from api.fhir_routes import router as fhir_out
from api.schemas import (
    ERRORS,
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
    Problem,
    ReplayOut,
)

log = logging.getLogger(__name__)

FHIR_TYPES = ("application/fhir+json", "application/json")
RECALL_NUMBER = r"^[A-Z]-\d{4}-\d{4}$"
API_PREFIX = "/api/v1/"  # where unsay_site/urls.py mounts api.urls


class UnsayApi(NinjaAPI):
    def get_openapi_operation_id(self, operation) -> str:
        """Stable when this module moves: generated clients name their methods after these ids, which
        were memory_api_views_<view> when the API lived in the memory app."""
        return f"memory_api_views_{operation.view_func.__name__}"

    def get_openapi_schema(self, *args, **kwargs):
        """Error responses are application/problem+json (ninja writes application/json for all)."""
        schema = super().get_openapi_schema(*args, **kwargs)
        for path in schema["paths"].values():
            for operation in path.values():
                for status, response in operation.get("responses", {}).items():
                    if int(status) >= 400 and "content" in response:
                        response["content"] = {problems.PROBLEM_CONTENT_TYPE: response["content"]["application/json"]}
        return schema


api = UnsayApi(
    title="Unsay API", version="1.0.0", urls_namespace="api_v1", auth=ApiKeyAuth(),
    description=("Medication-safety decisions with provenance: ask, read a decision and what it rests on, "
                 "check whether it still stands, replay what was believed then, record dispensing. "
                 "Errors are RFC 9457 problem details. See docs/api.md."),
)

# --- errors -----------------------------------------------------------------------------------------

@api.exception_handler(problems.Problem)
def _problem(request, exc: problems.Problem):
    return exc.response(instance=request.path)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    return problems.unauthenticated().response(instance=request.path)


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
    return problems.invalid("The request does not match the schema.", errors=errors).response(request.path)


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    return problems.Problem(exc.status_code, "http-error", str(exc)).response(request.path)


@api.exception_handler(Exception)
def _unexpected(request, exc):
    log.exception("API request %s %s failed", request.method, request.path)
    return problems.SERVER_ERROR.response(request.path)


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
          response={201: DispensingOut, 409: Problem, **ERRORS}, summary="Record a FHIR R4 MedicationDispense",
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
    fields = fhir.dispensing_fields(json.loads(request.body))
    record, warning = services.record_dispensing(request.auth, fields, actor=_actor(request))
    return Status(201, _dispensing_out(record, warning))


@api.get("/recalls/{recall_number}/exposure", response={200: ExposureOut, **GET_ERRORS},
         summary="Which of this client's patients received a recalled lot (pharmacist keys)")
def exposure(request, recall_number: str = Path(..., pattern=RECALL_NUMBER, max_length=40)):
    return services.recall_exposure(request.auth, recall_number)


def openapi_document() -> dict:
    """The document served at /api/v1/openapi.json, with the server prefix the app mounts it at."""
    return api.get_openapi_schema(path_prefix=API_PREFIX)


def unknown_route(request, rest=""):
    """Anything else under /api/v1/ answers a problem too, not Django's HTML 404 page."""
    return problems.not_found("No such endpoint; see /api/v1/openapi.json.").response(request.path)


# POST /epcis has its own auth and schemas (shelf receiving; api/epcis.py).
api.add_router("", epcis.router)
# FHIR out (corrections as CommunicationRequest, sent messages as Communication; docs/fhir.md).
api.add_router("/fhir", fhir_out)
