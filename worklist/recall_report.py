"""The recall effectiveness report: one row per patient (screen and CSV), its summary, and whether the
letters worked (replies)."""

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import Min
from django.utils import timezone

from corrections.models import OutboxMessage

from .models import PatientAnswer, PatientTask
from .patient_state import LinePages, PatientLine
from .recall_pages import recall_file, recall_page

# --- effectiveness report -----------------------------------------------------------------------

REPORT_COLUMNS = ["recall_number", "patient_ref", "patient_name", "match_class", "state", "first_contact_at",
                  "first_contact_by", "reached_or_notified_at", "reached_or_notified_by", "attempts"]


def report_row(recall_number: str, ln: PatientLine) -> dict:
    log = ln.attempts()
    first = next((e for e in log if e["at"]), None)
    ok = next((e for e in log if e["ok"]), None)
    return {
        "recall_number": recall_number, "patient_ref": ln.patient.external_ref,
        "patient_name": ln.patient.display_name, "match_class": ln.match_class, "state": ln.state,
        "first_contact_at": first["at"].isoformat() if first else "",
        "first_contact_by": first["by"] if first else "",
        "reached_or_notified_at": ok["at"].isoformat() if ok and ok["at"] else "",
        "reached_or_notified_by": ok["by"] if ok else "", "attempts": len(log),
    }


def report(recall_number: str, *, now=None) -> dict:
    """The report computed in Python over every patient (patient_lines): the definition that
    report_page()'s SQL counts are tested against."""
    f = recall_file(recall_number, now=now)
    rows = [report_row(recall_number, ln) for ln in f.lines]
    summary = {
        "exposed": len(rows),
        "by_class": f.by_class(),
        "contacted": sum(1 for ln in f.lines if ln.attempted),
        "reached": sum(1 for ln in f.lines if ln.state == "reached"),
        "notified": sum(1 for ln in f.lines if ln.state == "notified"),
        "not_needed": sum(1 for ln in f.lines if ln.state == "not_needed"),
        "not_reached": sum(1 for ln in f.lines if not ln.accounted),
    }
    return {"file": f, "rows": rows, "summary": summary, "columns": REPORT_COLUMNS}


class ReportRows:
    """The report's rows as a lazy sequence (pages of LinePages turned into rows)."""

    def __init__(self, recall_number: str, lines: LinePages):
        self.recall_number, self.lines = recall_number, lines

    def count(self) -> int:
        return self.lines.count()

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, item):
        if not isinstance(item, slice):
            return self[item:item + 1][0]
        return [report_row(self.recall_number, ln) for ln in self.lines[item]]

    def __iter__(self):
        for ln in self.lines:
            yield report_row(self.recall_number, ln)


def report_page(recall_number: str, *, now=None, page: int = 1, per_page: int = 50) -> dict:
    """The report from the SQL path: summary from the GROUP BY, rows materialised a page at a time."""
    f = recall_page(recall_number, now=now, page=page, per_page=per_page)
    return {"file": f, "rows": ReportRows(recall_number, f.lines), "summary": f.counts.summary(),
            "columns": REPORT_COLUMNS}


# --- replies: did the letters work? --------------------------------------------------------------

EFFECTIVENESS_COLUMNS = ["recall_number", "notified", "delivered", "replied", "replied_stopped", "replied_returned",
                         "replied_still_have", "replied_question", "no_reply_days", "no_reply", "follow_up_tasks_open",
                         "tasks_open"]


@dataclass
class LetterMilestones:
    """When each patient of one recall passed each step of the letter funnel: the one read that the
    effectiveness counts (reply_effectiveness) and the day-by-day timeline (worklist.glance) both add up."""

    notified: dict = field(default_factory=dict)   # patient id -> first letter approved and handed to the outbox
    delivered: dict = field(default_factory=dict)  # patient id -> first letter sent (email or SMS)
    answers: dict = field(default_factory=dict)    # patient id -> (newest answer, first answered at, newest at)


def letter_milestones(recall_number: str) -> LetterMilestones:
    messages = OutboxMessage.objects.filter(correction__recall_number=recall_number)
    handed = messages.exclude(status__in=[OutboxMessage.Status.HELD, OutboxMessage.Status.CANCELLED])
    notified = dict(handed.values_list("correction__patient_id").annotate(first=Min("created"))
                    .values_list("correction__patient_id", "first"))
    sent = dict(handed.filter(status=OutboxMessage.Status.SENT).values_list("correction__patient_id")
                .annotate(first=Min("sent_at")).values_list("correction__patient_id", "first"))
    answers = {}
    for patient_id, answer, at in (PatientAnswer.objects.filter(recall_number=recall_number).order_by("at", "id")
                                   .values_list("patient_id", "answer", "at")):
        first = answers[patient_id][1] if patient_id in answers else at
        answers[patient_id] = (answer, first, at)
    return LetterMilestones(notified, sent, answers)


def reply_effectiveness(recall_number: str, *, days: int | None = None, now=None,
                        milestones: LetterMilestones | None = None) -> dict:
    """Per recall, counted in patients: notified (a letter approved and handed to the outbox), delivered
    (sent), replied by answer (their newest answer), no reply `days` after the letter was sent, and the
    open follow-up tasks (worklist.services.open_no_reply_tasks opens them)."""
    days = settings.UNSAY_REPLY_FOLLOW_UP_DAYS if days is None else days
    now = now or timezone.now()
    m = letter_milestones(recall_number) if milestones is None else milestones
    by_answer = {a: 0 for a in PatientAnswer.Answer.values}
    for answer, _first, _newest in m.answers.values():
        by_answer[answer] += 1
    cutoff = now - timedelta(days=days)
    no_reply = sum(1 for pid, at in m.delivered.items() if pid not in m.answers and at and at <= cutoff)
    tasks = PatientTask.objects.filter(recall_number=recall_number, done_at=None)
    return {
        "recall_number": recall_number, "notified": len(m.notified), "delivered": len(m.delivered),
        "replied": len(m.answers), **{f"replied_{a}": n for a, n in by_answer.items()}, "no_reply_days": days,
        "no_reply": no_reply, "follow_up_tasks_open": tasks.filter(reason=PatientTask.Reason.NO_REPLY).count(),
        "tasks_open": tasks.count(),
    }
