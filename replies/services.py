"""Recording a patient's answer to a sent letter: one transaction, the link locked, idempotent."""

from django.db import transaction
from django.utils import timezone

from worklist import services as worklist_services

from .models import ReplyLink


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
