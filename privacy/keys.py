"""The API keys of an erased patient: revoked by the erasure, and refused (and audited) if ever used.

    revoke_patient_keys(patient_id) -> int        in the erasure's transaction (ask.keys.revoke_keys)
    refuse_erased_key(secret, key) -> bool        True if the caller must be refused as unauthenticated

A patient-bound key answers as its patient, so after an erasure it would let anyone who holds it ask again
in the patient's name, and what they asked would be stored anew. The erasure revokes it; the API refuses it
like any revoked key (401: a refusal tells the caller nothing about the erasure), and because someone still
holds and uses it, the first refusal per key each hour is an audit event (`key_refused`: the key's prefix and
its patient's public id, never what was asked). A key of an erased patient that is somehow still active (one
issued around the erasure) is revoked when it is first presented. The request itself is never read."""

from django.db import transaction

from ask import rate_limits
from ask.keys import MAX_SECRET_LENGTH, hash_secret, revoke_keys
from ask.models import ApiKey
from corrections import audit
from corrections.models import AuditEvent
from patients.erasure import is_erased

KEY_ACTOR = "api"


def revoke_patient_keys(patient_id: int) -> int:
    return revoke_keys(ApiKey.objects.filter(patient_id=patient_id))


def refuse_erased_key(secret: str | None, key: ApiKey | None) -> bool:
    """`key`: the active key the secret verified as (ask.keys.verify_key), or None. True when the secret is
    an erased patient's key: it is then revoked if it was not, and its use audited."""
    if key is None:
        secret = (secret or "").strip()
        if not secret or len(secret) > MAX_SECRET_LENGTH or not secret.isascii():
            return False
        key = ApiKey.objects.select_related("patient").filter(key_hash=hash_secret(secret)).first()
    if key is None or key.patient_id is None or not is_erased(key.patient):
        return False
    with transaction.atomic():
        revoke_keys([key])
        _audit_refusal(key)
    return True


def _audit_refusal(key: ApiKey) -> None:
    """Each refusal is counted per key and hour (ask's usage counters, one indexed row), and the first of
    the hour audited: a caller repeating the key cannot grow the audit chain faster than that."""
    if rate_limits.count(f"erased-key:{key.pk}", "hour") > 1:
        return
    audit.record(AuditEvent.Action.ERASED_KEY_REFUSED, by=KEY_ACTOR, after={
        "key_id": key.pk, "key": key.prefix, "patient": str(key.patient.public_id)},
        note="An erased patient's API key was presented and refused.")
