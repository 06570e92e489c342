"""Pharmacist review: a queue of drafts, per-card htmx actions (each also works as a plain POST +
redirect), bulk approve per recall with a confirmation step, and a per-recall dashboard."""

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from . import review
from .forms import BulkApproveForm, EditForm, RejectForm
from .models import Correction, SweepRun

HTMX_STOP_POLLING = 286


def pharmacist_required(view):
    """Logged in and holding corrections.review_correction, else 403 (checked on every request)."""

    @wraps(view)
    @login_required
    def wrapper(request, *args, **kwargs):
        if not review.can_review(request.user):
            raise PermissionDenied("Only pharmacists may review corrections.")
        return view(request, *args, **kwargs)

    return wrapper


def _draft(code) -> Correction:
    return get_object_or_404(
        Correction.objects.select_related("patient", "trigger_fact", "previous_fact", "old_decision")
        .defer("trigger_fact__embedding", "previous_fact__embedding"),
        public_id=code,
    )


def _card(request, correction, *, form=None, mode="view", error="", status=200):
    correction.refresh_from_db()
    return render(request, "corrections/_card.html",
                  {"c": correction, "form": form, "mode": mode, "error": error}, status=status)


@require_GET
@pharmacist_required
def queue(request):
    return render(request, "corrections/queue.html", {"groups": review.review_queue()})


def _act(request, correction, action, done: str):
    """Run one review action and answer: the swapped card for htmx, else a message and a redirect."""
    try:
        action()
    except review.NotReviewable as exc:
        if request.htmx:
            return _card(request, correction, error=exc.message, status=409)
        messages.error(request, exc.message)
        return redirect("corrections:queue")
    if request.htmx:
        return _card(request, correction)
    messages.success(request, f"{done} the message to {correction.patient.display_name}.")
    return redirect("corrections:queue")


@require_POST
@pharmacist_required
def approve(request, code):
    correction = _draft(code)
    return _act(request, correction, lambda: review.approve(correction.pk, user=request.user), "Approved")


@require_http_methods(["GET", "POST"])
@pharmacist_required
def edit(request, code):
    correction = _draft(code)
    if request.method == "POST":
        form = EditForm(request.POST)
        if form.is_valid():
            return _act(request, correction, lambda: review.approve(
                correction.pk, user=request.user, final_text=form.cleaned_data["final_text"]), "Edited and approved")
    else:
        form = EditForm(initial={"final_text": correction.text})
    if request.htmx:
        return _card(request, correction, form=form, mode="edit", status=400 if form.errors else 200)
    return render(request, "corrections/action_page.html", {"c": correction, "form": form, "mode": "edit"},
                  status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@pharmacist_required
def reject(request, code):
    correction = _draft(code)
    if request.method == "POST":
        form = RejectForm(request.POST)
        if form.is_valid():
            return _act(request, correction, lambda: review.reject(
                correction.pk, user=request.user, reason=form.cleaned_data["reason"]), "Rejected")
    else:
        form = RejectForm()
    if request.htmx:
        return _card(request, correction, form=form, mode="reject", status=400 if form.errors else 200)
    return render(request, "corrections/action_page.html", {"c": correction, "form": form, "mode": "reject"},
                  status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@pharmacist_required
def bulk_approve(request, recall_number):
    drafts = list(Correction.objects.pending_review().filter(recall_number=recall_number)
                  .select_related("patient").review_order())
    if request.method == "POST":
        form = BulkApproveForm(request.POST)
        if form.is_valid():
            # Only the drafts the pharmacist was shown on the confirmation page, if it listed them.
            ids = [int(i) for i in request.POST.getlist("ids") if i.isdigit()] or None
            approved = review.bulk_approve(recall_number, user=request.user, ids=ids)
            messages.success(request, f"Approved {len(approved)} draft{'s' if len(approved) != 1 else ''} "
                                      f"for recall {recall_number}.")
            if request.htmx:
                response = HttpResponse(status=204)
                response["HX-Redirect"] = request.build_absolute_uri("/corrections/review/")
                return response
            return redirect("corrections:queue")
    else:
        form = BulkApproveForm()
    return render(request, "corrections/bulk_confirm.html",
                  {"recall_number": recall_number, "drafts": drafts, "form": form},
                  status=400 if form.errors else 200)


@require_GET
@pharmacist_required
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
