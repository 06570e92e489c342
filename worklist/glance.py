"""The recall at a glance: the letter funnel and the day-by-day timelines (patients, shelf) that the recall page
and its effectiveness report draw as charts, list as tables and export as CSV. Reads only: every figure comes
from the selector that owns it, never counted again here.

    recall_glance(recall_number, *, exposed, deadline) -> Glance
        funnel     exposed (the page's GROUP BY) -> notified -> delivered -> replied, by answer (reply_effectiveness)
        patients   per day, so far: notified, delivered, replied, answered "returned" (letter_milestones)
        shelf      per day, so far: received, moved to quarantine, returned, dispensed (shelf.selectors)
    glance_csv_rows(glance) -> rows of GLANCE_COLUMNS
"""

from dataclasses import dataclass, field
from datetime import date

from django.utils import timezone

from shelf.selectors import recall_shelf_by_day

from .recall_list import Deadline
from .recall_report import letter_milestones, reply_effectiveness

# (key in reply_effectiveness or "exposed", label): the funnel's stages in order.
FUNNEL_STAGES = [
    ("exposed", "Exposed"),
    ("notified", "Letter approved"),  # "notified" as reply_effectiveness counts it: approved and handed for sending
    ("delivered", "Delivered"),
    ("replied", "Replied"),
    ("replied_stopped", "Replied: stopped"),
    ("replied_still_have", "Replied: still have it"),
    ("replied_question", "Replied: question"),
    ("replied_returned", "Replied: returned"),
]
PATIENT_SERIES = [("notified", "Letter approved"), ("delivered", "Delivered"), ("replied", "Replied"),
                  ("returned", "Returned")]
SHELF_SERIES = [("received", "Received"), ("quarantined", "Moved to quarantine"), ("returned", "Returned"),
                ("dispensed", "Dispensed")]
GLANCE_COLUMNS = ["recall_number", "chart", "day", "figure", "value"]


@dataclass
class Stage:
    key: str
    label: str
    count: int


@dataclass
class Timeline:
    """Per day with an event, each series' running total by the end of that day ("so far")."""

    series: list  # [(key, label)]
    days: list = field(default_factory=list)  # [(day, {key: total so far})]

    @property
    def totals(self) -> dict:
        return dict(self.days[-1][1]) if self.days else {key: 0 for key, _label in self.series}

    def rows(self):
        """(day, [total so far per series, in series order]) for the table beside the chart."""
        return [(day, [so_far[key] for key, _label in self.series]) for day, so_far in self.days]


def running_totals(series, per_day) -> Timeline:
    """A Timeline from {day: {key: count that day}}: the counts added up day by day."""
    total = {key: 0 for key, _label in series}
    days = []
    for day in sorted(per_day):
        for key in total:
            total[key] += per_day[day].get(key, 0)
        days.append((day, dict(total)))
    return Timeline(series, days)


def _day(moment) -> date:
    return timezone.localdate(moment)


def patient_timeline(milestones) -> Timeline:
    """Patients notified, delivered, replied (first answer) and answered "returned" (their newest answer), by day:
    the totals are reply_effectiveness()'s notified, delivered, replied and replied_returned."""
    per_day: dict = {}

    def add(key, moments):
        for moment in moments:
            if moment is not None:
                bucket = per_day.setdefault(_day(moment), {})
                bucket[key] = bucket.get(key, 0) + 1

    add("notified", milestones.notified.values())
    add("delivered", milestones.delivered.values())
    add("replied", (first for _answer, first, _newest in milestones.answers.values()))
    add("returned", (newest for answer, _first, newest in milestones.answers.values() if answer == "returned"))
    return running_totals(PATIENT_SERIES, per_day)


def shelf_timeline(recall_number: str) -> Timeline:
    return running_totals(SHELF_SERIES, dict(recall_shelf_by_day(recall_number)))


@dataclass
class Glance:
    recall_number: str
    funnel: list
    patients: Timeline
    shelf: Timeline
    deadline: Deadline
    replies: dict  # reply_effectiveness(): the report's letters-and-replies table reads the same dict

    def timelines(self):
        """(which, timeline, caption) for each timeline chart and its table."""
        return [("patients", self.patients,
                 "Patients whose letter was approved, delivered, who replied and who answered “returned”, so far by "
                 "the end of each day."),
                ("shelf", self.shelf, "The recall's units at every site received, moved to quarantine, returned and "
                                      "dispensed so far, by the end of each day.")]

    @property
    def deadline_day(self) -> date | None:
        return _day(self.deadline.due_at) if self.deadline.due_at else None


def recall_glance(recall_number: str, *, exposed: int, deadline: Deadline) -> Glance:
    """`exposed` and `deadline` are the recall page's own (RecallPage.exposed, RecallPage.deadline)."""
    milestones = letter_milestones(recall_number)
    replies = reply_effectiveness(recall_number, milestones=milestones)
    figures = {"exposed": exposed, **replies}
    funnel = [Stage(key, label, figures[key]) for key, label in FUNNEL_STAGES]
    return Glance(recall_number, funnel, patient_timeline(milestones), shelf_timeline(recall_number), deadline,
                  replies)


def glance_csv_rows(glance: Glance):
    """The charts' figures as CSV rows: the funnel's stages, then each timeline's running totals by day."""
    for stage in glance.funnel:
        yield [glance.recall_number, "funnel", "", stage.key, stage.count]
    for chart, timeline in (("patients_by_day", glance.patients), ("shelf_by_day", glance.shelf)):
        for day, so_far in timeline.days:
            for key, _label in timeline.series:
                yield [glance.recall_number, chart, day.isoformat(), key, so_far[key]]
    if glance.deadline_day:
        yield [glance.recall_number, "deadline", glance.deadline_day.isoformat(), "class1_deadline", ""]
