"""One recall's file and page (header, counts, patients page by page, what the lot parser was unsure
of, patients' answers and tasks) and the follow-up page across open recalls."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from corrections.models import Correction
from drugs.recall_terms import key_prefix
from memory.models import Fact
from patients.models import Patient
from recalls.selectors import recall_attributes

from .exposure import exposure_classes
from .models import STEP_ORDER, PatientAnswer, PatientTask, RecallTask, RecallWork, Step
from .patient_state import (
    ACCOUNTED_STATES,
    LinePages,
    PatientLine,
    StateCounts,
    _states_sql,
    patient_lines,
    state_counts,
)
from .recall_list import Deadline, RecallFacts, deadline_for, recall_facts, worklist


@dataclass
class RecallFile:
    facts: RecallFacts
    work: RecallWork | None
    steps: dict
    lines: list
    deadline: Deadline

    @property
    def recall_number(self):
        return self.facts.recall_number

    @property
    def exposed(self):
        return len(self.lines)

    @property
    def unaccounted(self):
        return [ln for ln in self.lines if not ln.accounted]

    @property
    def not_attempted(self):
        return [ln for ln in self.lines if not ln.attempted]

    @property
    def none_found(self) -> bool:
        return bool(self.work and self.work.none_found_at)

    @property
    def closed(self) -> bool:
        return Step.CLOSE in self.steps

    def step_rows(self):
        return [(step, self.steps.get(step)) for step in STEP_ORDER]

    def by_class(self) -> dict:
        counts = {}
        for ln in self.lines:
            counts[ln.match_class] = counts.get(ln.match_class, 0) + 1
        return counts


def recall_file(recall_number: str, *, now=None) -> RecallFile:
    facts = recall_facts([recall_number]).get(recall_number, RecallFacts(recall_number))
    work = RecallWork.objects.filter(recall_number=recall_number).select_related("none_found_by").first()
    steps = {t.step: t for t in RecallTask.objects.filter(work=work).select_related("done_by")} if work else {}
    notify = steps.get(Step.NOTIFY)
    return RecallFile(facts, work, steps, patient_lines(recall_number),
                      deadline_for(facts.first_class1, notify.done_at if notify else None, now=now))


@dataclass
class RecallPage:
    """What the recall page and the report show: the file's header (facts, work, steps, deadline),
    counts from one GROUP BY over the per-patient state in SQL, and the patients as lazy pages."""

    facts: RecallFacts
    work: RecallWork | None
    steps: dict
    counts: StateCounts
    lines: LinePages
    deadline: Deadline

    recall_number = RecallFile.recall_number
    none_found = RecallFile.none_found
    closed = RecallFile.closed
    step_rows = RecallFile.step_rows

    @property
    def exposed(self) -> int:
        return self.counts.total

    @property
    def unaccounted_count(self) -> int:
        return self.counts.total - self.counts.count(ACCOUNTED_STATES)

    @property
    def pending(self) -> int:
        return self.counts.pending

    def by_class(self) -> dict:
        return self.counts.by_class()


def recall_page(recall_number: str, *, now=None, page: int = 1, per_page: int = 50) -> RecallPage:
    """The recall's header, its counts and (read in the same query) patients page `page`; any other
    slice of `lines` is read when asked for."""
    facts = recall_facts([recall_number]).get(recall_number, RecallFacts(recall_number))
    work = RecallWork.objects.filter(recall_number=recall_number).select_related("none_found_by").first()
    steps = {t.step: t for t in RecallTask.objects.filter(work=work).select_related("done_by")} if work else {}
    notify = steps.get(Step.NOTIFY)
    classes = exposure_classes(recall_number)
    window = ((max(page, 1) - 1) * per_page, per_page)
    counts, rows = state_counts(recall_number, classes, page=window)
    return RecallPage(facts, work, steps, counts, LinePages(recall_number, classes, counts.total,
                                                            {(window[0], len(rows)): rows} if rows else None),
                      deadline_for(facts.first_class1, notify.done_at if notify else None, now=now))


def recall_known(recall_number: str) -> bool:
    return (Fact.objects.filter(kind=Fact.Kind.RECALL, fact_key__startswith=f"recall:{recall_number}:").exists()
            or Correction.objects.filter(recall_number=recall_number).exists())


# --- follow-up queue ----------------------------------------------------------------------------


def follow_up_queue(*, now=None) -> list[tuple[str, PatientLine]]:
    """Patients of open recalls not accounted for whose first attempt is older than
    UNSAY_FOLLOW_UP_DAYS (or who were never attempted at all once the recall is N days old)."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.UNSAY_FOLLOW_UP_DAYS)
    out = []
    for row in worklist(now=now):
        if row.closed or row.none_found:
            continue
        for line in patient_lines(row.recall_number):
            if line.accounted:
                continue
            started = line.first_attempt_at or row.facts.first_notified
            if line.state == "not_reached" or (started and started <= cutoff):
                out.append((row.recall_number, line))
    return out


FOLLOW_UP_SHOWN = 50  # per recall on the follow-up page, as a recall page shows 50; the recall page pages through all


def follow_up_page(*, now=None, per_recall: int = FOLLOW_UP_SHOWN) -> list[dict]:
    """follow_up_queue()'s patients from the per-patient state in SQL, per open recall: the first
    `per_recall` in its order, materialised, and how many there are in all."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.UNSAY_FOLLOW_UP_DAYS)
    out = []
    for row in worklist(now=now):
        if row.closed or row.none_found:
            continue
        classes = exposure_classes(row.recall_number)
        sql, params = _states_sql(row.recall_number, classes)
        sql += f"""
        SELECT s.patient_id, s.klass, s.state, count(*) OVER () FROM state s
        JOIN {connection.ops.quote_name(Patient._meta.db_table)} p ON p.id = s.patient_id
        WHERE NOT (s.state = ANY(%s)) AND (s.state = 'not_reached' OR COALESCE(s.first_at, %s) <= %s)
        ORDER BY p.display_name COLLATE "C", p.id LIMIT %s"""
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, list(ACCOUNTED_STATES), row.facts.first_notified, cutoff, per_recall])
            found = cursor.fetchall()
        if found:
            lines = LinePages(row.recall_number, classes, found[0][3])._materialise([r[:3] for r in found])
            out.append({"recall_number": row.recall_number, "lines": lines, "total": found[0][3]})
    return out


def uncertain_scope(recall_number: str) -> dict | None:
    """What the lot parser was unsure of for this recall (recalls.lots: a lot cut by openFDA's
    truncation, a lot rejoined across a re-wrap), beside the raw text it read; None when sure."""
    uncertain, truncated, raw, understood = [], False, "", []
    for fact in (Fact.objects.believed().filter(kind=Fact.Kind.RECALL, fact_key__startswith=key_prefix(recall_number))
                 .only("lot", "attributes", "fact_key")):
        scope = (fact.attributes or {}).get("lot_scope") or {}
        uncertain.extend(u for u in scope.get("uncertain") or [] if u not in uncertain)
        truncated = truncated or bool(scope.get("truncated"))
        raw = raw or recall_attributes(fact).get("code_info", "")
        if fact.lot:
            understood.append(fact.lot)
    if not uncertain and not truncated:
        return None
    return {"uncertain": uncertain, "truncated": truncated, "raw": raw, "understood": sorted(understood)}


# --- patient answers and tasks ------------------------------------------------------------------


def answers_and_tasks(recall_number: str, patient_ids) -> dict[int, dict]:
    """patient id -> {"answer": their newest answer on this recall or None, "tasks": open tasks}: two
    queries for a page of rows."""
    ids = list(patient_ids)
    out = {pid: {"answer": None, "tasks": []} for pid in ids}
    for answer in PatientAnswer.objects.filter(recall_number=recall_number, patient_id__in=ids).order_by("at", "id"):
        out[answer.patient_id]["answer"] = answer
    for task in (PatientTask.objects.filter(recall_number=recall_number, patient_id__in=ids, done_at=None)
                 .select_related("answer")):
        out[task.patient_id]["tasks"].append(task)
    return out


def open_patient_tasks(limit: int = 200) -> list:
    """Open patient tasks across recalls, oldest first (the follow-up queue): questions, Class I packs still
    held, letters nobody answered."""
    return list(PatientTask.objects.filter(done_at=None).select_related("patient", "answer")
                .order_by("created", "id")[:limit])
