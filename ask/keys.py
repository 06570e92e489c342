"""API keys: the one set of key services used by the admin, the HTTP API and the MCP server.

    check_key_scope(client, kind, patient, *, pharmacist=False)   raises ValueError if not a valid scope
    issue_key(client, *, kind, patient=None, name="", pharmacist=False) -> (ApiKey, secret)
    verify_key(secret) -> ApiKey | None          an active key for the secret (and marks it used)
    revoke_keys(queryset_or_keys) -> int         revoked now (already-revoked keys are left alone)
    check_site_name(site)                        raises ValueError unless a site name a shelf can have
    grant_site(client, site) -> ClientSite       the client's pharmacy keys may act on stock there
    holds_site(key, site) -> bool                may this key receive stock and move units at the site?

Only sha256(secret) is stored (ApiKey.key_hash); the secret is returned once, by issue_key. A
secret is 32 random bytes, so a fast hash is enough (no password stretching needed).

A key's authority follows its client's data: patients through ClientPatient, sites through ClientSite
(docs/tenancy.md). A patient-bound key holds no site: it speaks for one patient, never for a shelf.
"""

import hashlib
import secrets

from django.db import transaction
from django.utils import timezone

from ask.models import ApiKey, ClientPatient, ClientSite
from patients.erasure import is_erased

SECRET_PREFIX = "usk_"
MAX_SECRET_LENGTH = 200  # a bearer value longer than any secret we issue is refused unhashed
MAX_SITE_LENGTH = 200  # as shelf.models.Unit.site


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def check_key_scope(client, kind, patient, *, pharmacist: bool = False) -> None:
    """Raise ValueError unless (client, kind, patient, pharmacist) is a valid key scope."""
    if kind == ApiKey.Kind.PATIENT:
        if patient is None:
            raise ValueError("A patient-facing key needs a patient.")
        if is_erased(patient):
            raise ValueError("This patient's personal data was erased on request: no key can be issued for them.")
        if not ClientPatient.objects.filter(client=client, patient=patient).exists():
            raise ValueError(f"Patient {patient.external_ref} does not belong to client {client}.")
        if pharmacist:
            raise ValueError("A patient-facing key cannot have the pharmacist scope.")
    elif kind == ApiKey.Kind.PHARMACY:
        if patient is not None:
            raise ValueError("A pharmacy key is not bound to a patient; it names one per request.")
    else:
        raise ValueError(f"Unknown key kind {kind!r}.")


def issue_key(client, *, kind=ApiKey.Kind.PHARMACY, patient=None, name: str = "",
              pharmacist: bool = False) -> tuple[ApiKey, str]:
    """Create a key and return (key, secret). The secret is not stored and cannot be shown again."""
    check_key_scope(client, kind, patient, pharmacist=pharmacist)
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(client=client, kind=kind, patient=patient, name=name, pharmacist_scope=pharmacist,
                 prefix=secret[:12], key_hash=hash_secret(secret))
    key.save()
    return key, secret


def verify_key(secret: str | None) -> ApiKey | None:
    """The active key whose secret this is, or None (missing, unknown, revoked or malformed)."""
    secret = (secret or "").strip()
    if not secret or len(secret) > MAX_SECRET_LENGTH or not secret.isascii():
        return None
    key = (ApiKey.objects.active().select_related("client", "patient")
           .filter(key_hash=hash_secret(secret)).first())
    if key is not None:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    return key


def bearer_secret(authorization: str | None) -> str | None:
    """The secret of an `Authorization: Bearer <secret>` header value, or None."""
    scheme, _, secret = (authorization or "").partition(" ")
    return secret.strip() or None if scheme.lower() == "bearer" else None


def revoke_keys(keys) -> int:
    """Revoke the given keys (a queryset or an iterable of ApiKey); returns how many were active."""
    ids = list(keys.values_list("pk", flat=True)) if hasattr(keys, "values_list") else [k.pk for k in keys]
    with transaction.atomic():
        return ApiKey.objects.filter(pk__in=ids, revoked_at__isnull=True).update(revoked_at=timezone.now())


def check_site_name(site: str) -> None:
    """Raise ValueError unless `site` can name a shelf (EPCIS receipts compare it exactly)."""
    if not site or len(site) > MAX_SITE_LENGTH or "\x00" in site or site != site.strip():
        raise ValueError(f"A site is 1 to {MAX_SITE_LENGTH} characters, without surrounding spaces.")


def grant_site(client, site: str) -> ClientSite:
    """Let the client's pharmacy keys receive stock and move units at `site` (idempotent)."""
    check_site_name(site)
    return ClientSite.objects.get_or_create(client=client, site=site)[0]


def holds_site(key: ApiKey, site: str) -> bool:
    """Whether this key may act on the stock of `site`: a pharmacy key whose client holds it, exactly as named."""
    return (key.kind == ApiKey.Kind.PHARMACY
            and ClientSite.objects.filter(client_id=key.client_id, site=site).exists())
