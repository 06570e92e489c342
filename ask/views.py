"""The pharmacist's ask screen: pick a patient, ask, see the verdict and the exact fact versions it read."""

import uuid

from django.db.models import Q
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_http_methods

from ask.forms import AskForm
from ask.services import ask_each
from core.roles import ASK_SCREEN, requires_permission
from patients.models import Patient

PATIENT_SEARCH_LIMIT = 20


ask_screen_required = requires_permission(ASK_SCREEN, "Only pharmacists may use the ask screen.")


def search_patients(query: str):
    query = (query or "").strip()
    if not query:
        return Patient.objects.none()
    return Patient.objects.filter(Q(display_name__icontains=query) | Q(external_ref__iexact=query)
                                  | Q(external_ref__istartswith=query)).order_by("display_name")[:PATIENT_SEARCH_LIMIT]


def _patient_or_none(public_id):
    try:
        return Patient.objects.filter(public_id=uuid.UUID(str(public_id))).first() if public_id else None
    except ValueError:
        return None


def replay_url(decision) -> str:
    """The memory app's replay view when it exists, else the decision in the admin."""
    for name in ("admin:memory_decision_replay", "admin:memory_decision_change"):
        try:
            return reverse(name, args=[decision.pk])
        except NoReverseMatch:
            continue
    return ""


def _search_query(request) -> str:
    """The patient search text, from the POST body only: names in URLs end up in access logs,
    browser history and proxies (a probe once found 80 access-log lines with names). NUL and
    other control characters are dropped (PostgreSQL refuses NUL; nobody types them)."""
    raw = request.POST.get("q", "") if request.method == "POST" else ""
    return "".join(ch for ch in raw if ch.isprintable())[:200]


@require_http_methods(["GET", "POST"])
@ask_screen_required
def ask_screen(request):
    query = _search_query(request)
    searching = request.method == "POST" and "q" in request.POST and "question" not in request.POST
    if searching and request.htmx:
        return render(request, "memory/ask.html#patient-options", {"patients": search_patients(query), "q": query})
    context = {"q": query, "patients": search_patients(query), "decision": None}
    if searching:
        context["patient"] = None
        form = AskForm()
    elif request.method == "POST":
        form = AskForm(request.POST)
        if form.is_valid():
            patient = form.cleaned_data["patient"]
            # A question naming two medicines ("my losartan and my atorvastatin") is answered per medicine.
            decisions = ask_each(patient, form.cleaned_data["question"], subject=form.cleaned_data["subject"] or None)
            answers = [{"decision": d, "reads": list(d.reads.select_related("fact")), "replay_url": replay_url(d)}
                       for d in decisions]
            context.update(answers=answers, decision=decisions[0], patient=patient)
        else:
            context["patient"] = _patient_or_none(request.POST.get("patient"))
    else:
        context["patient"] = _patient_or_none(request.GET.get("patient"))
        form = AskForm(initial={"patient": context["patient"].public_id} if context["patient"] else None)
    context["form"] = form
    template = "memory/ask.html#result" if request.htmx and request.method == "POST" else "memory/ask.html"
    # htmx swaps only 2xx responses, so an invalid form is answered 200 with its errors shown.
    return render(request, template, context)
