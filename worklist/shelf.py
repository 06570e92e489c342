"""The shelf half of a recall in the worklist: per site, the units the recall matched (received, on hand,
dispensed and to whom, quarantined, returned), with the quarantine and return confirmations.

    shelf_half(recall_number, *, now=None) -> [ShelfRow]     reads (shelf.selectors) plus the deadline
    shelf_panel / shelf_quarantine / shelf_return            views: the panel alone (htmx) and the two actions

A Class I recall's shelf task has the same deadline as its patient work (recall_list.deadline_for from the
first Class I version), met when the quarantine is confirmed.
"""

from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from corrections.views import reviewer_required
from shelf import quarantine
from shelf.models import ShelfTask
from shelf.selectors import TaskView, recall_shelf

from . import recall_list


@dataclass
class ShelfRow:
    view: TaskView
    deadline: recall_list.Deadline

    @property
    def task(self):
        return self.view.task

    @property
    def counts(self):
        return self.view.counts


def shelf_half(recall_number: str, *, now=None) -> list[ShelfRow]:
    views = recall_shelf(recall_number)
    if not views:
        return []
    facts = recall_list.recall_facts([recall_number]).get(recall_number, recall_list.RecallFacts(recall_number))
    return [ShelfRow(v, recall_list.deadline_for(facts.first_class1, v.task.quarantined_at, now=now)) for v in views]


class CountForm(forms.Form):
    counted = forms.IntegerField(min_value=0, max_value=1_000_000, label="Units counted")
    note = forms.CharField(required=False, max_length=2000)


def _panel(request, recall_number, status=200):
    return render(request, "worklist/_shelf.html", {"shelf": shelf_half(recall_number),
                                                    "recall_number": recall_number}, status=status)


@require_GET
@reviewer_required
def shelf_panel(request, recall_number):
    return _panel(request, recall_number)


def _confirm(request, code, action, done):
    task = get_object_or_404(ShelfTask, public_id=code)
    form = CountForm(request.POST)
    status = 200
    if not form.is_valid():
        messages.error(request, "Give the number of units counted (0 or more).")
        status = 400
    else:
        try:
            moved = action(task, counted=form.cleaned_data["counted"], user=request.user,
                           note=form.cleaned_data["note"])
        except quarantine.ShelfError as exc:
            messages.error(request, str(exc))
            status = 409
        else:
            messages.success(request, f"{done} at {task.site}: {moved} unit{'s' if moved != 1 else ''} on record, "
                                      f"{form.cleaned_data['counted']} counted.")
    if request.htmx:
        return _panel(request, task.recall_number, status=status)
    return redirect("worklist:recall", task.recall_number)


@require_POST
@reviewer_required
def shelf_quarantine(request, code):
    return _confirm(request, code, quarantine.confirm_quarantine, "Quarantine confirmed")


@require_POST
@reviewer_required
def shelf_return(request, code):
    return _confirm(request, code, quarantine.confirm_return, "Return confirmed")


@require_POST
@reviewer_required
def shelf_destroy(request, code):
    return _confirm(request, code, quarantine.confirm_destruction, "Destruction confirmed")
