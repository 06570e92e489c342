"""The public reply page, /r/<token>: no login, no cookie, no JavaScript. Every refusal (unknown, forged,
expired or used link) is the same page with the same status, so a response never tells whether a patient,
a letter or a link exists."""

from django.conf import settings
from django.shortcuts import render
from django.utils import translation
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from core.client_address import client_address
from corrections.drafting import language_of

from . import links, services
from .forms import ReplyForm


def _page(request, template, context=None, *, status=200, language=None):
    with translation.override(language or translation.get_language_from_request(request) or "en"):
        response = render(request, template, {"pharmacy_name": settings.UNSAY_PHARMACY_NAME,
                                              "pharmacy_phone": settings.UNSAY_PHARMACY_PHONE,
                                              **(context or {})}, status=status)
    response["Referrer-Policy"] = "no-referrer"  # the token must not leak to any other site
    response["X-Robots-Tag"] = "noindex"
    return response


# The token in the URL is the only credential and no session or cookie is read or set: a cross-site form
# could only post what its author already knows (the token), so CSRF protection would add nothing and would
# refuse browsers that block cookies.
@csrf_exempt
@never_cache
@require_http_methods(["GET", "POST"])
def reply(request, token):
    # Two limits: refused tokens per client address (guessing; behind a proxy every patient shares its
    # address, and a patient's own link must still work), and uses per link.
    link = links.find(token)
    if services.over_limit(link, client_address(request)):
        return _page(request, "replies/refused.html", {"too_many": True}, status=429)
    if link is None or (request.method == "GET" and link.answer_id is not None):
        return _page(request, "replies/refused.html", status=404)
    language = language_of(link.message.correction.patient)
    with translation.override(language):
        form = ReplyForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                services.record_reply(link, form.cleaned_data["answer"], text=form.cleaned_data["text"])
            except services.LinkUsed:
                return _page(request, "replies/refused.html", status=404)
            return _page(request, "replies/thanks.html", {"answer": form.cleaned_data["answer"]}, language=language)
        return _page(request, "replies/reply.html", {"form": form}, status=400 if form.is_bound else 200,
                     language=language)
