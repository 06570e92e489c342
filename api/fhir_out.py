"""Corrections out as FHIR R4: each correction a CommunicationRequest (its status follows the draft), each
sent message a Communication, and searchset Bundles by patient and status. Every resource is validated
with fhir.resources (R4B models: CommunicationRequest and Communication are unchanged from R4) before it
leaves. Patients are referenced as Patient/<external reference>, as the MedicationDispense input names them.

Scoping is the rest of the API's: a pharmacy key sees its client's patients; a patient key sees only what
was sent to its own patient (never a draft the pharmacist has not reviewed). The payload is the reviewed
text; the reply link added at send time is the patient's own credential and is not repeated here."""

from fhir.resources.R4B.bundle import Bundle
from fhir.resources.R4B.communication import Communication
from fhir.resources.R4B.communicationrequest import CommunicationRequest

from api import problems
from ask.models import ApiKey, ClientPatient
from corrections.models import Correction, OutboxMessage

RECALL_SYSTEM = "https://www.accessdata.fda.gov/scripts/ires/index.cfm"  # FDA enforcement report numbers
CORRECTION_SYSTEM = "urn:unsay:correction"
MODE_SYSTEM = "http://terminology.hl7.org/CodeSystem/v3-ParticipationMode"
CATEGORY_SYSTEM = "http://terminology.hl7.org/CodeSystem/communication-category"
MEDIUM = {"email": ("EMAILWRIT", "email"), "sms": ("SMSWRIT", "SMS message")}

# Correction status -> CommunicationRequest.status (request-status): a draft awaits review, an approved
# correction is active until sent, a rejected or stale one is revoked, a sent one completed.
REQUEST_STATUS = {
    Correction.Status.DRAFT: "draft",
    Correction.Status.APPROVED: "active",
    Correction.Status.REJECTED: "revoked",
    Correction.Status.STALE: "revoked",
    Correction.Status.SENT: "completed",
}
STATUSES_OF = {}
for _ours, _theirs in REQUEST_STATUS.items():
    STATUSES_OF.setdefault(_theirs, []).append(_ours)


def _patient_ref(patient) -> dict:
    return {"reference": f"Patient/{patient.external_ref}", "display": patient.display_name}


def _about(correction) -> list[dict]:
    if not correction.recall_number:
        return []
    return [{"identifier": {"system": RECALL_SYSTEM, "value": correction.recall_number},
             "display": f"FDA recall {correction.recall_number}" + (f" ({correction.classification})"
                                                                    if correction.classification else "")}]


def _medium(channel: str) -> list[dict]:
    code, display = MEDIUM.get(channel, ("WRITTEN", "written"))
    return [{"coding": [{"system": MODE_SYSTEM, "code": code, "display": display}]}]


def _instant(value) -> str | None:
    return value.isoformat() if value else None


def communication_request(correction: Correction) -> dict:
    message = getattr(correction, "message", None)
    status = REQUEST_STATUS.get(correction.status, "unknown")
    resource = {
        "resourceType": "CommunicationRequest",
        "id": str(correction.public_id),
        "identifier": [{"system": CORRECTION_SYSTEM, "value": str(correction.public_id)}],
        "status": status,
        "category": [{"coding": [{"system": CATEGORY_SYSTEM, "code": "alert"}],
                      "text": correction.get_kind_display()}],
        "priority": "urgent" if correction.severity >= 3 else "routine",
        "subject": _patient_ref(correction.patient),
        "recipient": [_patient_ref(correction.patient)],
        "about": _about(correction),
        "medium": _medium(message.channel if message else correction.patient.preferred_channel),
        "payload": [{"contentString": correction.text}],
        "authoredOn": _instant(correction.created),
    }
    if status == "revoked":
        reason = correction.rejection_reason or correction.get_status_display()
        resource["statusReason"] = {"text": reason}
    return _valid(CommunicationRequest, resource)


def communication(message: OutboxMessage) -> dict:
    correction = message.correction
    resource = {
        "resourceType": "Communication",
        "id": str(correction.public_id),
        "basedOn": [{"reference": f"CommunicationRequest/{correction.public_id}"}],
        "status": "completed",
        "category": [{"coding": [{"system": CATEGORY_SYSTEM, "code": "alert"}]}],
        "subject": _patient_ref(correction.patient),
        "recipient": [_patient_ref(correction.patient)],
        "about": _about(correction),
        "medium": _medium(message.channel),
        "sent": _instant(message.sent_at),
        "payload": [{"contentString": message.body}],
    }
    return _valid(Communication, resource)


def _valid(model, resource: dict) -> dict:
    resource = {k: v for k, v in resource.items() if v not in (None, [], "")}
    model.model_validate(resource)  # raises on anything FHIR R4 would refuse
    return resource


def bundle(resources: list[dict], *, total: int) -> dict:
    document = {"resourceType": "Bundle", "type": "searchset", "total": total,
                "entry": [{"fullUrl": f"urn:uuid:{r['id']}", "resource": r, "search": {"mode": "match"}}
                          for r in resources]}
    Bundle.model_validate(document)
    return document


# --- scoping and search ----------------------------------------------------------------------------

def _visible(key: ApiKey, queryset, *, patient_field: str):
    patients = ClientPatient.objects.filter(client_id=key.client_id).values("patient_id")
    queryset = queryset.filter(**{f"{patient_field}__in": patients})
    if key.kind == ApiKey.Kind.PATIENT:
        queryset = queryset.filter(**{patient_field: key.patient_id})
    return queryset


def _requests(key: ApiKey):
    queryset = Correction.objects.select_related("patient", "message")
    queryset = _visible(key, queryset, patient_field="patient_id")
    if key.kind == ApiKey.Kind.PATIENT:
        queryset = queryset.filter(status=Correction.Status.SENT)
    return queryset


def _messages(key: ApiKey):
    queryset = OutboxMessage.objects.filter(status=OutboxMessage.Status.SENT).select_related("correction__patient")
    return _visible(key, queryset, patient_field="correction__patient_id")


def _by_patient(queryset, patient: str | None, field: str):
    if patient:
        ref = patient.removeprefix("Patient/")
        queryset = queryset.filter(**{f"{field}__external_ref": ref})
    return queryset


MAX_PAGE = 100


def search_requests(key: ApiKey, *, patient: str | None = None, status: str | None = None,
                    count: int = 50) -> dict:
    queryset = _by_patient(_requests(key), patient, "patient")
    if status:
        wanted = [s for part in status.split(",") for s in STATUSES_OF.get(part.strip(), [])]
        if not all(part.strip() in STATUSES_OF for part in status.split(",")):
            raise problems.invalid("status must be draft, active, revoked or completed (comma-separated for any).")
        queryset = queryset.filter(status__in=wanted)
    queryset = queryset.order_by("-created", "-id")
    found = list(queryset[:min(max(count, 1), MAX_PAGE)])
    return bundle([communication_request(c) for c in found], total=queryset.count())


def search_communications(key: ApiKey, *, patient: str | None = None, status: str | None = None,
                          count: int = 50) -> dict:
    queryset = _by_patient(_messages(key), patient, "correction__patient")
    if status and "completed" not in [s.strip() for s in status.split(",")]:
        queryset = queryset.none()  # every Communication here is completed (sent)
    queryset = queryset.order_by("-sent_at", "-id")
    found = list(queryset[:min(max(count, 1), MAX_PAGE)])
    return bundle([communication(m) for m in found], total=queryset.count())


def read_request(key: ApiKey, public_id) -> dict:
    correction = _requests(key).filter(public_id=public_id).first()
    if correction is None:
        raise problems.not_found("No such CommunicationRequest for this key.")
    return communication_request(correction)


def read_communication(key: ApiKey, public_id) -> dict:
    message = _messages(key).filter(correction__public_id=public_id).first()
    if message is None:
        raise problems.not_found("No such Communication for this key.")
    return communication(message)
