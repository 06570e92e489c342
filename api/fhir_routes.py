"""FHIR out endpoints, mounted by api/views.py under /api/v1/fhir: corrections as CommunicationRequest and
sent messages as Communication (api/fhir_out.py builds and validates them; docs/fhir.md). Same key auth and
limits as every other endpoint; answered as application/fhir+json (or application/json when asked), refusals
as OperationOutcome (api/fhir_media.py)."""

import re
from uuid import UUID

from ninja import Path, Query, Router

from api import fhir_media, fhir_out, problems
from api.schemas import FHIR_GET_ERRORS, FhirResource

router = Router(tags=["FHIR out"])

STATUS = re.compile(r"^(draft|active|revoked|completed)(,(draft|active|revoked|completed))*$")
PATIENT_MAX = 80


def _checked(patient: str | None, status: str | None) -> None:
    if patient is not None and len(patient) > PATIENT_MAX:
        raise problems.invalid(f"patient is at most {PATIENT_MAX} characters.")
    if status is not None and not STATUS.match(status):
        raise problems.invalid("status is draft, active, revoked or completed (comma-separated for any).")


@router.get("/CommunicationRequest", response={200: FhirResource, **FHIR_GET_ERRORS},
            summary="Corrections as FHIR R4 CommunicationRequest (a searchset Bundle)")
def fhir_communication_requests(request, patient: Query[str | None] = None, status: Query[str | None] = None,
                                count: int = Query(50, alias="_count", ge=1, le=fhir_out.MAX_PAGE)):
    """`patient`: Patient/<reference> or the reference; `status`: draft, active, revoked, completed
    (comma-separated). Newest first. A patient key sees only what was sent to its own patient."""
    media = fhir_media.negotiate(request)
    _checked(patient, status)
    return fhir_media.answer(fhir_out.search_requests(request.auth, patient=patient, status=status, count=count),
                             media)


@router.get("/CommunicationRequest/{correction_id}", response={200: FhirResource, **FHIR_GET_ERRORS},
            summary="One correction as a FHIR R4 CommunicationRequest")
def fhir_communication_request(request, correction_id: Path[UUID]):
    media = fhir_media.negotiate(request)
    return fhir_media.answer(fhir_out.read_request(request.auth, correction_id), media)


@router.get("/Communication", response={200: FhirResource, **FHIR_GET_ERRORS},
            summary="Sent messages as FHIR R4 Communication (a searchset Bundle)")
def fhir_communications(request, patient: Query[str | None] = None, status: Query[str | None] = None,
                        count: int = Query(50, alias="_count", ge=1, le=fhir_out.MAX_PAGE)):
    media = fhir_media.negotiate(request)
    _checked(patient, status)
    return fhir_media.answer(fhir_out.search_communications(request.auth, patient=patient, status=status,
                                                            count=count), media)


@router.get("/Communication/{correction_id}", response={200: FhirResource, **FHIR_GET_ERRORS},
            summary="One sent message as a FHIR R4 Communication")
def fhir_communication(request, correction_id: Path[UUID]):
    media = fhir_media.negotiate(request)
    return fhir_media.answer(fhir_out.read_communication(request.auth, correction_id), media)
