"""JSON API: POST /api/ask and GET /api/decisions/<public_id>, authenticated by API keys.

Keys: `Authorization: Bearer <secret>`. Only sha256(secret) is stored (ApiKey.key_hash); the secret
is shown once, by create_api_key (the admin shows it after "Save"). Scoping:

- a patient-facing key is bound to one patient: /api/ask always answers for that patient, and a
  request naming any other patient is rejected (403); it can read only that patient's decisions.
- a pharmacy key must name a patient ({"patient": "<external_ref or public_id>"}) that belongs to its
  client (memory.ClientPatient); other patients are 404, as if they did not exist.
"""

import hashlib
import json
import secrets
import uuid

from django.db.models import Q
from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from patients.models import Patient

from .ask import ask
from .models import ApiKey, ClientPatient, Decision

SECRET_PREFIX = "usk_"
MAX_QUESTION = 1000


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def check_key_scope(client, kind, patient):
    """Raise ValueError unless (client, kind, patient) is a valid key scope."""
    if kind == ApiKey.Kind.PATIENT:
        if patient is None:
            raise ValueError("A patient-facing key needs a patient.")
        if not ClientPatient.objects.filter(client=client, patient=patient).exists():
            raise ValueError(f"Patient {patient.external_ref} does not belong to client {client}.")
    elif patient is not None:
        raise ValueError("A pharmacy key is not bound to a patient; it names one per request.")


def issue_secret(key: ApiKey) -> str:
    """Give an unsaved key a fresh secret; returns it (only its hash is kept)."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    key.prefix, key.key_hash = secret[:12], hash_secret(secret)
    return secret


def create_api_key(client, *, kind=ApiKey.Kind.PHARMACY, patient=None, name="") -> tuple[ApiKey, str]:
    """Create a key and return (key, secret). The secret is not stored and cannot be shown again."""
    check_key_scope(client, kind, patient)
    key = ApiKey(client=client, kind=kind, patient=patient, name=name)
    secret = issue_secret(key)
    key.save()
    return key, secret


def revoke_api_key(key: ApiKey) -> bool:
    return ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()) == 1


def authenticate(request) -> ApiKey | None:
    header = request.headers.get("Authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return None
    key = (ApiKey.objects.active().select_related("client", "patient")
           .filter(key_hash=hash_secret(secret.strip())).first())
    if key is not None:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    return key


def error(message: str, status: int) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="unsay"'
    return response


def _patient_by_ref(ref: str):
    ref = str(ref).strip()
    query = Q(external_ref=ref)
    try:
        query |= Q(public_id=uuid.UUID(ref))
    except ValueError:
        pass
    return Patient.objects.filter(query).first()


def _patient_for(key: ApiKey, requested):
    """(patient, None) or (None, error response) for the patient a request is about."""
    if key.kind == ApiKey.Kind.PATIENT:
        if requested not in (None, "") and _patient_by_ref(requested) != key.patient:
            return None, error("This key answers only for its own patient; don't name another.", 403)
        if not ClientPatient.objects.filter(client=key.client, patient=key.patient).exists():
            return None, error("This key's patient is no longer a patient of its client.", 403)
        return key.patient, None
    if requested in (None, ""):
        return None, error('A pharmacy key must name the patient: {"patient": "<reference>"}.', 400)
    patient = _patient_by_ref(requested)
    if patient is None or not ClientPatient.objects.filter(client=key.client, patient=patient).exists():
        return None, error("No such patient for this client.", 404)
    return patient, None


def can_see(key: ApiKey, decision: Decision) -> bool:
    if decision.patient_id is None:
        return False
    if key.kind == ApiKey.Kind.PATIENT and decision.patient_id != key.patient_id:
        return False
    return ClientPatient.objects.filter(client=key.client, patient_id=decision.patient_id).exists()


def decision_json(decision: Decision) -> dict:
    return {
        "id": str(decision.public_id),
        "patient": decision.patient.external_ref if decision.patient_id else None,
        "question": decision.question,
        "subject": decision.subject,
        "verdict": decision.verdict,
        "answer": decision.answer,
        "reasoner": decision.reasoner,
        "guardrail_override": bool(decision.guardrail_override),
        "status": decision.status,
        "decided_at": decision.decided_at.isoformat(),
        "citations": [
            {"fact_key": r.fact_key, "version": r.fact_version, "load_bearing": r.load_bearing,
             "score": r.score, "statement": r.fact.statement}
            for r in decision.reads.select_related("fact").order_by("rank")
        ],
    }


@csrf_exempt  # bearer-token API: no cookies, so no CSRF exposure
@require_POST
def ask_view(request):
    key = authenticate(request)
    if key is None:
        return error("Missing, unknown or revoked API key (Authorization: Bearer <key>).", 401)
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return error("The body must be JSON.", 400)
    if not isinstance(body, dict):
        return error("The body must be a JSON object.", 400)
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        return error('"question" is required (a non-empty string).', 400)
    if len(question) > MAX_QUESTION:
        return error(f'"question" is longer than {MAX_QUESTION} characters.', 400)
    subject = body.get("subject")
    if subject is not None and not isinstance(subject, str):
        return error('"subject" must be a string.', 400)
    patient, failure = _patient_for(key, body.get("patient"))
    if failure:
        return failure
    decision = ask(patient, question, subject=subject or None, client=key.client)
    return JsonResponse(decision_json(decision), status=200)


@require_GET
def decision_view(request, public_id):
    key = authenticate(request)
    if key is None:
        return error("Missing, unknown or revoked API key (Authorization: Bearer <key>).", 401)
    decision = Decision.objects.select_related("patient").filter(public_id=public_id).first()
    if decision is None or not can_see(key, decision):
        return error("No such decision for this key.", 404)
    return JsonResponse(decision_json(decision))
