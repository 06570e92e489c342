"""Check my pack, /check: no login, no cookie; the form works without JavaScript (the barcode reader is an
addition, ask/static/check/). Nothing typed is stored or logged: the form is POSTed (no query string in any
request line), and only the outcome is counted (ask.pack_check_counts)."""

from django.conf import settings
from django.shortcuts import render
from django.utils import translation
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from ask import pack_check_counts, pack_words
from ask.forms import PackForm
from ask.pack_check import check_pack
from core.client_address import client_address

LANGUAGE_CODES = {code for code, _name in settings.LANGUAGES}


def chosen_language(request) -> str:
    """The reply pages' choice (the browser's Accept-Language), unless the page's own switch asked for one."""
    asked = (request.POST.get("lang") or request.GET.get("lang") or "").strip()
    if asked in LANGUAGE_CODES:
        return asked
    return translation.get_language_from_request(request) or "en"


def _page(request, context, *, status=200):
    response = render(request, "check/check.html", {"pharmacy_name": settings.UNSAY_PHARMACY_NAME,
                                                    "pharmacy_phone": settings.UNSAY_PHARMACY_PHONE, **context},
                      status=status)
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex"
    return response


# No session and nothing changed but a counter: a cross-site post could only spend its own sender's
# checks, and CSRF protection would need a cookie this page does not set.
@csrf_exempt
@never_cache
@require_http_methods(["GET", "POST"])
def check_my_pack(request):
    with translation.override(chosen_language(request)):
        if request.method == "GET":
            return _page(request, {"form": PackForm()})
        form = PackForm(request.POST)
        result = check_pack(form.cleaned_data["pack"]) if form.is_valid() else None
        if not pack_check_counts.take_check(client_address(request), result.outcome if result else ""):
            return _page(request, {"form": form, "too_many": True}, status=429)
        if result is None:
            return _page(request, {"form": form}, status=400)
        shown = [{"recall": recall, "lots": pack_words.lots_recalled(recall),
                  "classification": pack_words.class_words(recall)} for recall in result.recalls]
        return _page(request, {"form": form, "result": result, "headline": pack_words.headline(result),
                               "what_to_do": pack_words.what_to_do(result), "shown": shown})
