"""Recording a patient's answer to a sent letter: one transaction, the link locked, idempotent; and the limit
on how often a link, or a client address presenting refused tokens, may be used."""

import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ask import rate_limits
from worklist import services as worklist_services

from .models import ReplyLink

LINK_SCOPE = "reply:link:"
MISS_SCOPE = "reply:miss:"
PRUNE_ONE_IN = 100


def over_limit(link: ReplyLink | None, address: str, *, now=None) -> bool:
    """One more use of `link` this hour, or, with no link (a refused token: guessing), one more from this client
    address; True past UNSAY_REPLY_RATE. Counted in the database (ask.rate_limits), so the limit holds across
    every web worker; the address is kept only as its pseudonym for the day."""
    now = now or timezone.now()
    if link is not None:
        scope = f"{LINK_SCOPE}{link.pk}"
    else:
        scope = MISS_SCOPE + rate_limits.pseudonym("reply", address or "unknown", now.date())
    granted = rate_limits.take(scope, "hour", settings.UNSAY_REPLY_RATE, now=now)
    if not granted or secrets.randbelow(PRUNE_ONE_IN) == 0:
        # Now and then, and whenever someone is refused: the counts of hours gone by are of no more use.
        rate_limits.prune("reply:", rate_limits.window_start("hour", now) - timedelta(hours=1))
    return not granted


class LinkUsed(Exception):
    """The link already carried a different answer: it answers once."""


def record_reply(link: ReplyLink, answer: str, *, text: str = "", now=None):
    """The patient's answer, on their recall row (worklist.services.record_answer), and the link marked
    used. The same answer again (a double click, a resent form) returns the recorded one; a different one
    raises LinkUsed and changes nothing."""
    now = now or timezone.now()
    text = (text or "").strip()
    with transaction.atomic():
        link = (ReplyLink.objects.select_for_update(of=("self",)).select_related("answer", "message__correction")
                .get(pk=link.pk))
        if link.answer_id is not None:
            recorded = link.answer
            if recorded.answer == answer and (recorded.text or "") == (text if answer == "question" else ""):
                return recorded
            raise LinkUsed()
        recorded = worklist_services.record_answer(link.message.correction, answer, text=text, now=now)
        link.answer, link.used_at = recorded, now
        link.save(update_fields=["answer", "used_at"])
        return recorded
