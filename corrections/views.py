"""Pharmacist review: a queue of drafts, per-card htmx actions (each also works as a plain POST +
redirect), bulk approve per recall with a confirmation step, and a per-recall dashboard."""


from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from core.roles import REVIEW_SCREEN, requires_permission

from . import review
from .drafting import sms_limit
from .forms import BulkApproveForm, EditForm, RejectForm
from .models import Correction, OutboxMessage, SweepRun

HTMX_STOP_POLLING = 286


reviewer_required = requires_permission(REVIEW_SCREEN, "Only pharmacists may review corrections.")


def _draft(code) -> Correction:
    return get_object_or_404(review.card_queryset(), public_id=code)


def _card(request, correction, *, form=None, mode="view", error="", status=200):
    """The card, fresh from the database. An error answer keeps its status (409 conflict, 400 bad
    input) and tells htmx to swap it over the card anyway (base.html lets 400/409 swap), so the
    pharmacist always sees why nothing happened."""
    correction = review.card_queryset().get(pk=correction.pk)
    response = render(request, "corrections/_card.html",
                      {"c": correction, "form": form, "mode": mode, "error": error, "review_base": _review_base(),
                       "recipient_problem": _recipient_problem(correction)}, status=status)
    if status >= 400 and request.htmx:
        response = reswap(retarget(response, f"#card-{correction.public_id}"), "outerHTML")
    return response


def _review_base() -> str:
    return reverse("corrections:queue")


def _recipient_problem(correction) -> str:
    if correction.status != Correction.Status.DRAFT:
        return ""
    try:
        message = correction.message
    except OutboxMessage.DoesNotExist:
        message = None
    return review.recipient_problem(message, correction.patient)


def _sms_limit(correction) -> int | None:
    try:
        channel = correction.message.channel
    except OutboxMessage.DoesNotExist:
        channel = correction.patient.contact()[0]
    return sms_limit() if channel == "sms" else None


@require_GET
@reviewer_required
def queue(request):
    return render(request, "corrections/queue.html", {"groups": review.review_queue(), "review_base": _review_base()})


@require_GET
@reviewer_required
def more_hx(request, recall_number):
    """The next page of one recall's cards (htmx "more"), with its own "more" button if any remain."""
    after = request.GET.get("after", "")
    cards, more = review.group_drafts(recall_number, after_id=int(after) if after.isdigit() else None)
    return render(request, "corrections/_cards_page.html",
                  {"cards": cards, "more_after": more, "recall_number": recall_number, "review_base": _review_base()})


def _act(request, correction, action, done: str):
    """Run one review action and answer: the swapped card for htmx, else a message and a redirect.
    Refusals are never silent: 409 (changed meanwhile) or 400 (bad input) with an explaining card."""
    try:
        action()
    except review.NotReviewable as exc:
        if request.htmx:
            return _card(request, correction, error=exc.message, status=exc.status,
                         form=EditForm(request.POST, sms_limit=_sms_limit(correction))
                         if exc.status == 400 and "final_text" in request.POST else None,
                         mode="edit" if exc.status == 400 and "final_text" in request.POST else "view")
        if exc.status == 400 and "final_text" in request.POST:
            return render(request, "corrections/action_page.html",
                          {"c": correction, "form": EditForm(request.POST, sms_limit=_sms_limit(correction)),
                           "mode": "edit", "error": exc.message,
                           "recipient_problem": _recipient_problem(correction),
                           "review_base": _review_base()}, status=400)
        messages.error(request, exc.message)
        return redirect("corrections:queue")
    if request.htmx:
        return _card(request, correction)
    messages.success(request, f"{done} the message to {correction.patient.display_name}.")
    return redirect("corrections:queue")


@require_POST
@reviewer_required
def approve(request, code):
    correction = _draft(code)
    return _act(request, correction, lambda: review.approve(correction.pk, user=request.user), "Approved")


@require_http_methods(["GET", "POST"])
@reviewer_required
def edit(request, code):
    correction = _draft(code)
    limit = _sms_limit(correction)
    if request.method == "POST":
        form = EditForm(request.POST, sms_limit=limit)
        if form.is_valid():
            return _act(request, correction, lambda: review.approve(
                correction.pk, user=request.user, final_text=form.cleaned_data["final_text"]), "Edited and approved")
    else:
        form = EditForm(initial={"final_text": correction.text}, sms_limit=limit)
    error = "Nothing was saved: " + " ".join(form.errors.get("final_text", [])) if form.errors else ""
    if request.htmx:
        return _card(request, correction, form=form, mode="edit", error=error, status=400 if form.errors else 200)
    return render(request, "corrections/action_page.html",
                  {"c": correction, "form": form, "mode": "edit", "error": error,
                   "recipient_problem": _recipient_problem(correction), "review_base": _review_base()},
                  status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@reviewer_required
def reject(request, code):
    correction = _draft(code)
    if request.method == "POST":
        form = RejectForm(request.POST)
        if form.is_valid():
            return _act(request, correction, lambda: review.reject(
                correction.pk, user=request.user, reason=form.cleaned_data["reason"]), "Rejected")
    else:
        form = RejectForm()
    error = "Not rejected: a rejection needs a reason." if form.errors else ""
    if request.htmx:
        return _card(request, correction, form=form, mode="reject", error=error, status=400 if form.errors else 200)
    return render(request, "corrections/action_page.html",
                  {"c": correction, "form": form, "mode": "reject", "error": error,
                   "recipient_problem": _recipient_problem(correction), "review_base": _review_base()},
                  status=400 if form.errors else 200)


@require_POST
@reviewer_required
def use_current_contact(request, code):
    correction = _draft(code)
    return _act(request, correction, lambda: review.use_current_contact(correction.pk, user=request.user),
                "Re-addressed")


@require_http_methods(["GET", "POST"])
@reviewer_required
def bulk_approve(request, recall_number):
    drafts = list(Correction.objects.pending_review().filter(recall_number=recall_number)
                  .select_related("patient").review_order())
    if request.method == "POST":
        form = BulkApproveForm(request.POST)
        if form.is_valid():
            # Only the drafts the pharmacist was shown on the confirmation page, if it listed them.
            ids = [int(i) for i in request.POST.getlist("ids") if i.isdigit()] or None
            result = review.bulk_approve(recall_number, user=request.user, ids=ids)
            done, total = len(result.approved), len(result.approved) + len(result.skipped)
            messages.success(request, f"Approved {done} of {total} draft{'s' if total != 1 else ''} "
                                      f"for recall {recall_number}.")
            for _id, name, why in result.skipped:
                messages.warning(request, f"Not approved: {name}: {why}")
            if request.htmx:
                return HttpResponseClientRedirect(reverse("corrections:queue"))
            return redirect("corrections:queue")
    else:
        form = BulkApproveForm()
    return render(request, "corrections/bulk_confirm.html",
                  {"recall_number": recall_number, "drafts": drafts, "form": form},
                  status=400 if form.errors else 200)


@require_GET
@reviewer_required
def dashboard(request):
    return render(request, "corrections/dashboard.html", {"rows": review.recall_dashboard()})


@require_GET
@login_required
def sweep_runs_hx(request):
    """The sweep-runs table for the operations page; htmx polls it and stops (286) when none run."""
    if not request.user.has_perm("corrections.view_sweeprun"):
        raise PermissionDenied
    runs = list(SweepRun.objects.all()[:10])
    running = any(r.status == SweepRun.Status.RUNNING for r in runs)
    response = render(request, "corrections/_sweep_runs.html", {"runs": runs, "running": running})
    if request.htmx and not running:
        response.status_code = HTMX_STOP_POLLING
    return response
