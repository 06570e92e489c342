"""The list of recalls the pharmacy works: each recall's believed facts, its Class I deadline and its
counts of drafts, sends and patients not reached."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Min, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from corrections.models import CLASS_SEVERITY, Correction, OutboxMessage, Redecision
from memory.models import Fact
from recalls.selectors import resolved_attributes_of

from .match_classes import match_class_sql
from .models import STEP_ORDER, ContactAttempt, RecallTask, RecallWork, Step
from .patient_state import ACCOUNTED_OUTCOMES

# --- recall facts -------------------------------------------------------------------------------


@dataclass
class RecallFacts:
    recall_number: str
    classification: str = ""
    status: str = ""
    subject: str = ""
    product: str = ""
    reason: str = ""
    firm: str = ""
    first_notified: datetime | None = None  # first version of any fact of this recall
    latest: datetime | None = None
    first_class1: datetime | None = None  # belief time of the first Class I version

    @property
    def severity(self) -> int:
        return CLASS_SEVERITY.get(self.classification, 0)


def recall_facts(numbers) -> dict[str, RecallFacts]:
    """One GROUP BY for the times, one read of the believed versions for class, status and product."""
    numbers = [n for n in set(numbers) if n]
    if not numbers:
        return {}
    out = {n: RecallFacts(n) for n in numbers}
    base = Fact.objects.filter(kind=Fact.Kind.RECALL, attributes__recall_number__in=numbers)
    for row in base.values("attributes__recall_number").annotate(
        first=Min("asserted_at"), latest=Max("asserted_at"),
        first_class1=Min("asserted_at", filter=Q(attributes__classification="Class I")),
    ):
        r = out.get(row["attributes__recall_number"])
        if r:
            r.first_notified, r.latest, r.first_class1 = row["first"], row["latest"], row["first_class1"]
    first: dict[str, tuple] = {}
    for number, attrs, subject in (base.filter(retracted_at__isnull=True).order_by("fact_key")
                                   .values_list("attributes__recall_number", "attributes", "subject")):
        if number in out and number not in first:
            first[number] = (attrs, subject)
    # The texts (product, reason, firm) inline or by reference: one lookup for the whole list.
    resolved = resolved_attributes_of(attrs for attrs, subject in first.values())
    for (number, (_attrs, subject)), attrs in zip(first.items(), resolved, strict=True):
        r = out[number]
        r.classification = attrs.get("classification", "")
        r.status = attrs.get("status", "")
        r.subject = subject
        r.product = attrs.get("product_description", "")
        r.reason = attrs.get("reason", "")
        r.firm = attrs.get("firm", "")
    return out


# --- deadline -----------------------------------------------------------------------------------


@dataclass
class Deadline:
    state: str  # "none" (not Class I) | "due" | "overdue" | "met" | "missed"
    due_at: datetime | None = None
    done_at: datetime | None = None

    @property
    def label(self) -> str:
        return {"none": "", "due": _("Due"), "overdue": _("Overdue"), "met": _("Met"),
                "missed": _("Missed")}[self.state]

    @property
    def open(self) -> bool:
        return self.state in ("due", "overdue")


def deadline_for(first_class1: datetime | None, notified_at: datetime | None, *, now=None) -> Deadline:
    """Class I: patients must be notified within UNSAY_CLASS1_DEADLINE_DAYS of the pharmacy first
    believing the Class I version. `notified_at` is when the "notify patients" step was recorded."""
    if first_class1 is None:
        return Deadline("none")
    due = first_class1 + timedelta(days=settings.UNSAY_CLASS1_DEADLINE_DAYS)
    if notified_at is not None:
        return Deadline("met" if notified_at <= due else "missed", due, notified_at)
    now = now or timezone.now()
    return Deadline("due" if now <= due else "overdue", due)


# --- the worklist -------------------------------------------------------------------------------


@dataclass
class WorklistRow:
    facts: RecallFacts
    by_class: dict = field(default_factory=dict)
    answered: int = 0
    pending: int = 0
    approved: int = 0
    sent: int = 0
    not_reached: int = 0
    steps: dict = field(default_factory=dict)  # step -> RecallTask
    none_found: bool = False
    deadline: Deadline = field(default_factory=lambda: Deadline("none"))

    @property
    def recall_number(self):
        return self.facts.recall_number

    @property
    def closed(self) -> bool:
        return Step.CLOSE in self.steps

    @property
    def next_step(self):
        for step in STEP_ORDER:
            if step not in self.steps:
                return step
        return None

    @property
    def status(self) -> str:
        if self.closed:
            return _("Closed") + (" (" + _("checked, none found") + ")" if self.none_found else "")
        nxt = self.next_step
        return _("Next: %(step)s") % {"step": Step(nxt).label} if nxt else ""


def _not_reached_by_recall() -> dict[str, int]:
    """Patients with a failed attempt (send failed or unknown, not reached, wrong number) and no
    success (reached, letter posted, message sent, no contact needed) for the same recall: the
    not_reached state of _state(), counted per recall in SQL."""
    q = connection.ops.quote_name
    C, M, A = (q(m._meta.db_table) for m in (Correction, OutboxMessage, ContactAttempt))
    MS, O = OutboxMessage.Status, ContactAttempt.Outcome  # noqa: E741
    sql = f"""
    WITH bad AS (
        SELECT c.recall_number, c.patient_id FROM {C} c JOIN {M} m ON m.correction_id = c.id
        WHERE m.status = ANY(%s)
        UNION
        SELECT recall_number, patient_id FROM {A} WHERE outcome = ANY(%s))
    SELECT b.recall_number, count(*) FROM bad b
    WHERE NOT EXISTS (SELECT 1 FROM {A} a WHERE a.recall_number = b.recall_number AND a.patient_id = b.patient_id
                      AND a.outcome = ANY(%s))
      AND NOT EXISTS (SELECT 1 FROM {C} c WHERE c.recall_number = b.recall_number AND c.patient_id = b.patient_id
                      AND c.status = %s)
    GROUP BY b.recall_number"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [[MS.FAILED, MS.UNKNOWN], [O.NOT_REACHED, O.WRONG_NUMBER],
                             [str(o) for o in ACCOUNTED_OUTCOMES], Correction.Status.SENT])
        return dict(cursor.fetchall())


def worklist(*, now=None) -> list[WorklistRow]:
    """Every recall with a patient on file for it (a draft, a re-decided answer or an opened
    worklist), newest and most severe first. A constant number of queries, whatever the drafts."""
    S = Correction.Status
    rows: dict[str, WorklistRow] = {}
    counts = (Correction.objects.exclude(status=S.STALE).exclude(recall_number="")
              .annotate(mc=match_class_sql()).values("recall_number", "mc", "match")
              .annotate(n=Count("id"), pending=Count("id", filter=Q(status=S.DRAFT)),
                        approved=Count("id", filter=Q(status__in=[S.APPROVED, S.SENT])),
                        sent=Count("id", filter=Q(status=S.SENT))))
    for item in counts:
        row = rows.setdefault(item["recall_number"], WorklistRow(RecallFacts(item["recall_number"])))
        if item["match"] == Correction.Match.ASKED:
            row.answered += item["n"]
        if item["mc"] and item["mc"] != "asked":  # corrections carry their class too (drugs.matching)
            row.by_class[item["mc"]] = row.by_class.get(item["mc"], 0) + item["n"]
        row.pending += item["pending"]
        row.approved += item["approved"]
        row.sent += item["sent"]
    for number in Redecision.objects.exclude(recall_number="").values_list("recall_number", flat=True).distinct():
        rows.setdefault(number, WorklistRow(RecallFacts(number)))
    works = {w.recall_number: w for w in RecallWork.objects.all()}
    for number in works:
        rows.setdefault(number, WorklistRow(RecallFacts(number)))
    facts = recall_facts(rows)
    for task in RecallTask.objects.select_related("work", "done_by"):
        if task.work.recall_number in rows:
            rows[task.work.recall_number].steps[task.step] = task
    for number, n in _not_reached_by_recall().items():
        if number in rows:
            rows[number].not_reached = n
    for number, row in rows.items():
        row.facts = facts.get(number, row.facts)
        work = works.get(number)
        row.none_found = bool(work and work.none_found_at)
        notify = row.steps.get(Step.NOTIFY)
        row.deadline = deadline_for(row.facts.first_class1, notify.done_at if notify else None, now=now)
    never = datetime.min.replace(tzinfo=timezone.get_current_timezone())
    # Open before closed; then most severe; then newest (latest version believed).
    return sorted(rows.values(), key=lambda r: (r.closed, -r.facts.severity,
                                                -(r.facts.latest or never).timestamp(), r.recall_number))


def deadline_status(*, now=None) -> dict:
    """The status line: Class I recalls still due or overdue (for the worklist banner and JSON)."""
    rows = [r for r in worklist(now=now) if not r.closed]
    due = [r for r in rows if r.deadline.state == "due"]
    overdue = [r for r in rows if r.deadline.state == "overdue"]
    return {
        "open": len(rows), "due": len(due), "overdue": len(overdue),
        "next_due_at": min((r.deadline.due_at for r in due), default=None),
        "overdue_recalls": [r.recall_number for r in overdue],
    }
