"""The reply link of a sent message: /r/<token>, where the token is 128 bits of an HMAC (the site's secret
key, salted) over the message's dedupe key. Deterministic, so a retried send carries the same link; only
its SHA-256 is stored (ReplyLink.token_hash), so the table alone cannot mint a working link. The URL names
no patient, recall or message: a forged token finds no row, and every refusal looks the same."""

import hashlib
from base64 import urlsafe_b64encode
from datetime import timedelta

from django.conf import settings
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.translation import override

from corrections.drafting import language_of

from .models import ReplyLink

SALT = "unsay.replies.link.v1"
TOKEN_LENGTH = 22  # 16 bytes, base64url without padding


def token_for(message) -> str:
    mac = salted_hmac(SALT, f"{message.pk}:{message.dedupe_key}", algorithm="sha256").digest()
    return urlsafe_b64encode(mac[:16]).rstrip(b"=").decode()


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def url_for(token: str) -> str:
    return f"{settings.UNSAY_SITE_URL}/r/{token}"


def link_for(message, *, now=None) -> tuple[ReplyLink, str]:
    """The message's link row (created on its first send) and its token."""
    token = token_for(message)
    digest = token_hash(token)
    now = now or timezone.now()
    link, created = ReplyLink.objects.get_or_create(
        message=message, defaults={"token_hash": digest,
                                   "expires_at": now + timedelta(days=settings.UNSAY_REPLY_LINK_DAYS)})
    if not created and link.token_hash != digest:  # the secret key was rotated: the new link replaces the old
        link.token_hash = digest
        link.save(update_fields=["token_hash"])
    return link, token


def footer(message) -> str:
    """What a sent letter ends with: the reply link, in the patient's language (outbox.dispatch
    calls this through its SEND_FOOTERS; replies.apps registers it)."""
    _, token = link_for(message)
    patient = message.correction.patient
    with override(language_of(patient)):
        name = "letters/reply_link_sms.txt" if message.channel == "sms" else "letters/reply_link_email.txt"
        return render_to_string(name, {"url": url_for(token)}).strip()


def find(token: str, *, now=None) -> ReplyLink | None:
    """The live link for a token, or None: unknown, malformed, expired, or its message never sent. (A
    used link is returned: the caller decides, because the same answer again is a retry.)"""
    if not token or len(token) != TOKEN_LENGTH:
        return None
    now = now or timezone.now()
    link = (ReplyLink.objects.select_related("message__correction__patient", "answer")
            .filter(token_hash=token_hash(token)).first())
    if link is None or link.expires_at <= now or link.message.status != "sent":
        return None
    return link
