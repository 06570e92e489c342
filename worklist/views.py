"""The pharmacist's recall screens: worklist (home), one recall's file, the follow-up queue, the
effectiveness report (page + CSV), sent/approved history and the audit trail by patient.
Thin views: a form, one service call, a redirect; reads come from the worklist's read modules
(recall_list, recall_pages, recall_report, glance, contact_history)."""

import uuid

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core.exports import csv_writer
from corrections.models import Correction
from corrections.views import reviewer_required
from patients.models import Patient

from . import contact_history, glance, recall_list, recall_pages, recall_report, services
from .forms import ContactForm, NoneFoundForm, OpenRecallForm, StepForm
from .models import ContactAttempt, PatientTask

PATIENTS_PER_PAGE = 50


def _row_controls(request) -> dict:
    """The same contact controls and URL shapes on every patient row: rendered / reversed once per
    page, not once per row (a page of 50-100 rows spent most of its time there)."""
    choices = {"methods": ContactAttempt.Method.choices, "outcomes": ContactAttempt.Outcome.choices}
    controls = render_to_string("worklist/_contact_controls.html", choices, request=request)
    return {**choices, "contact_controls": controls,
            "trail_url": _url_around("worklist:patient_trail"), "contact_url": _url_around("worklist:log_contact")}


def _url_around(name: str) -> tuple[str, str]:
    """(before, after) the patient's code in the URL `name`: one reverse for a page of rows."""
    placeholder = uuid.UUID(int=0)
    before, after = reverse(name, args=[placeholder]).split(str(placeholder))
    return before, after


def _page_number(request) -> int:
    """The ?page= asked for, read ahead so the page comes with the counts; Paginator still validates."""
    value = request.GET.get("page", "")
    return int(value) if value.isdigit() and int(value) > 0 else 1


@require_GET
@reviewer_required
def home(request):
    form = OpenRecallForm(request.GET or None)
    if form.is_bound and form.is_valid():
        return redirect("worklist:recall", form.cleaned_data["recall"].strip())
    rows = recall_list.worklist()
    open_rows = [r for r in rows if not r.closed]
    return render(request, "worklist/home.html", {
        "rows": rows, "form": form, "match_classes": ["confirmed", "probable", "candidate"],
        "deadline_days": settings.UNSAY_CLASS1_DEADLINE_DAYS,
        "due": [r for r in open_rows if r.deadline.state == "due"],
        "overdue": [r for r in open_rows if r.deadline.state == "overdue"],
    })


@require_GET
@reviewer_required
def status_json(request):
    status = recall_list.deadline_status()
    status["next_due_at"] = status["next_due_at"].isoformat() if status["next_due_at"] else None
    return JsonResponse(status)


@require_GET
@reviewer_required
def recall(request, recall_number):
    f = recall_pages.recall_page(recall_number, page=_page_number(request), per_page=PATIENTS_PER_PAGE)
    if not f.exposed and not f.work and not recall_pages.recall_known(recall_number):
        return render(request, "worklist/unknown.html", {"recall_number": recall_number}, status=404)
    # Patients not accounted for come first, a page at a time: a national recall can expose
    # thousands. Counts come from one GROUP BY; only this page's patients are read.
    page = Paginator(f.lines, PATIENTS_PER_PAGE).get_page(request.GET.get("page"))
    # What each patient on this page answered (replies app) and the tasks it opened.
    page.object_list = list(page.object_list)
    replies = recall_pages.answers_and_tasks(recall_number, [ln.patient.id for ln in page.object_list])
    for ln in page.object_list:
        ln.reply = replies.get(ln.patient.id)
    return render(request, "worklist/recall.html", {
        "f": f, "page": page, **_row_controls(request),
        "g": glance.recall_glance(recall_number, exposed=f.exposed, deadline=f.deadline),
        "none_found_form": NoneFoundForm(initial={"recall_number": recall_number}),
        "pending": f.pending, "uncertain": recall_pages.uncertain_scope(recall_number),
    })


def _back(recall_number):
    return redirect("worklist:recall", recall_number)


@require_POST
@reviewer_required
def step(request):
    form = StepForm(request.POST)
    if not form.is_valid():
        messages.error(request, "That step could not be recorded: " + "; ".join(
            f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("worklist:home")
    number = form.cleaned_data["recall_number"]
    try:
        task = services.complete_step(number, form.cleaned_data["step"], user=request.user,
                                      note=form.cleaned_data["note"])
    except services.WorkflowError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Recorded: {task.get_step_display()}.")
    return _back(number)


@require_POST
@reviewer_required
def none_found(request):
    form = NoneFoundForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Could not record the finding.")
        return redirect("worklist:home")
    number = form.cleaned_data["recall_number"]
    try:
        services.record_none_found(number, user=request.user, note=form.cleaned_data["note"])
    except services.WorkflowError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Recorded: checked, none found.")
    return _back(number)


@require_POST
@reviewer_required
def log_contact(request, code):
    patient = get_object_or_404(Patient, public_id=code)
    form = ContactForm(request.POST)
    number = request.POST.get("recall_number", "")
    if not form.is_valid():
        messages.error(request, "The contact was not logged: " + "; ".join(
            f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return _back(number) if number else redirect("worklist:home")
    correction = (Correction.objects.filter(patient=patient, recall_number=number)
                  .exclude(status=Correction.Status.STALE).order_by("-id").first())
    try:
        services.log_contact(number, patient, user=request.user, method=form.cleaned_data["method"],
                             outcome=form.cleaned_data["outcome"], note=form.cleaned_data["note"],
                             correction=correction)
    except services.WorkflowError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Logged the contact with {patient.display_name}.")
    return _back(number)


@require_GET
@reviewer_required
def follow_up(request):
    groups = recall_pages.follow_up_page()
    return render(request, "worklist/follow_up.html", {
        "items": [(g["recall_number"], ln) for g in groups for ln in g["lines"]],
        "more": [g for g in groups if g["total"] > len(g["lines"])], **_row_controls(request),
        "tasks": recall_pages.open_patient_tasks()})


@require_GET
@reviewer_required
def report(request, recall_number):
    every = bool(request.GET.get("all"))
    data = recall_report.report_page(recall_number, page=1 if every else _page_number(request),
                                 per_page=PATIENTS_PER_PAGE)
    # ?all=1 prints every row; by default a page at a time (the CSV always has every row).
    per_page = (len(data["rows"]) or 1) if every else PATIENTS_PER_PAGE
    page = Paginator(data["rows"], per_page).get_page(request.GET.get("page"))
    g = glance.recall_glance(recall_number, exposed=data["file"].exposed, deadline=data["file"].deadline)
    return render(request, "worklist/report.html", {**data, "f": data["file"], "now": timezone.now(), "page": page,
                                                    "g": g, "replies": g.replies})


def _csv_download(recall_number: str, what: str):
    """(response, CSV writer) for a recall's CSV download, named recall-<number>-<what>.csv; the writer
    neutralises every cell a spreadsheet would read as a formula (core.exports)."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in recall_number)
    response["Content-Disposition"] = f'attachment; filename="recall-{safe}-{what}.csv"'
    return response, csv_writer(response)


@require_GET
@reviewer_required
def effectiveness_csv(request, recall_number):
    """The recall's letter effectiveness counts (notified, delivered, replies by answer, no reply) as one CSV row."""
    counts = recall_report.reply_effectiveness(recall_number)
    response, writer = _csv_download(recall_number, "replies")
    writer.writerow(recall_report.EFFECTIVENESS_COLUMNS)
    writer.writerow([counts[c] for c in recall_report.EFFECTIVENESS_COLUMNS])
    return response


@require_GET
@reviewer_required
def glance_csv(request, recall_number):
    """The figures the recall-at-a-glance charts draw (funnel, patients and shelf by day, the deadline), one per row."""
    f = recall_pages.recall_page(recall_number, per_page=1)
    response, writer = _csv_download(recall_number, "glance")
    writer.writerow(glance.GLANCE_COLUMNS)
    writer.writerows(glance.glance_csv_rows(glance.recall_glance(recall_number, exposed=f.exposed,
                                                                 deadline=f.deadline)))
    return response


@require_GET
@reviewer_required
def report_csv(request, recall_number):
    data = recall_report.report_page(recall_number)
    response, writer = _csv_download(recall_number, "report")
    writer.writerow(data["columns"])
    for row in data["rows"]:
        writer.writerow([row[c] for c in data["columns"]])
    return response


@require_GET
@reviewer_required
def history(request):
    before = request.GET.get("before", "")
    items, more = contact_history.sent_history(before_id=int(before) if before.isdigit() else None)
    return render(request, "worklist/history.html", {"items": items, "more": more})


@require_GET
@reviewer_required
def patient_trail(request, code):
    patient = get_object_or_404(Patient, public_id=code)
    return render(request, "worklist/patient.html",
                  {"patient": patient, "trail": contact_history.patient_trail(patient)})


@require_POST
@reviewer_required
def complete_task(request, code):
    """A pharmacist marks a patient task done (answered the question, called the patient)."""
    try:
        task = services.complete_patient_task(code, user=request.user)
    except PatientTask.DoesNotExist:
        return HttpResponse(status=404)
    messages.success(request, f"Done: {task.get_reason_display()}.")
    return _back(task.recall_number)
