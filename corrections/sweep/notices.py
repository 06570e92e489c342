"""Notices: after a sweep's re-decisions, which patients and recalls to look at, so that every patient
exposed to a recall and found affected holds one reviewed letter about it (corrections.recall_letters
says which letter, and what happens to one that no longer holds). Per recall:

  - the exposed patients of a recall fact that is new or got worse (a new recall, a lot added, an
    escalation, a re-opening): those who never asked, in one anti-join; and those who asked and hold
    an affected answer resting on it with no pending correction about the recall (their re-decision
    drafted none: the app's answer is not a reviewed letter);
  - every patient with a pending notice about the recall when one of its facts changed (a version
    superseded, a lot withdrawn or added): the notice is replaced in the same transaction, or staled
    when they are no longer exposed;
  - for patients whose dispensing changed: every recall their packs may be from, and every recall
    they hold a pending notice about.
"""

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection
from django.db.models import Exists, OuterRef
from django.utils import timezone

from core.retry import run_in_transaction
from drugs.identity import readable
from drugs.recall_terms import is_active, recall_number
from memory.models import Decision, Fact
from patients.models import Patient
from patients.services import Match, exposed_patients

from ..models import Correction
from ..recall_letters import (
    AFFECTED,
    PENDING,
    latest_version,
    owed_recalls,
    plan,
    settle,
    situations,
    worsened,
)
from . import faults, staleness
from .report import SweepReport, save_run_progress
from .staleness import Scope

CHUNK = 500  # patients whose dispensing and letters are read together


def worsened_pairs(fact_ids=None) -> list[tuple[Fact, Fact]]:
    """(predecessor, believed version) for recall facts that got worse.

    With fact_ids: the successors of those retracted versions. Without: every believed recall
    version > 1 whose predecessor was milder (the periodic catch-all; settling is idempotent).
    """
    pairs = []
    if fact_ids:
        olds = Fact.objects.filter(id__in=list(fact_ids), kind=Fact.Kind.RECALL).defer("embedding")
        for old in olds:
            new = latest_version(old)
            if new is not None and worsened(old, new):
                pairs.append((old, new))
    else:
        olds = (Fact.objects.filter(kind=Fact.Kind.RECALL, retracted_at__isnull=False, superseded_by__isnull=False,
                                    superseded_by__retracted_at__isnull=True)
                .select_related("superseded_by").defer("embedding", "superseded_by__embedding"))
        for old in olds:
            if worsened(old, old.superseded_by):
                pairs.append((old, old.superseded_by))
    return pairs


def new_recall_facts(fact_ids=None) -> list[Fact]:
    """Believed recall facts that no earlier version led to: a brand-new recall, a lot added to a
    recall, a key re-asserted after a retraction; active, or closed in a recall we have believed
    active (a recall closed when we first learn of it owes no letter: a history load). With fact_ids:
    those among them. Without: those asserted in the last UNSAY_NOTICE_LOOKBACK_DAYS (the periodic
    catch-all; settling is idempotent)."""
    qs = Fact.objects.believed().filter(kind=Fact.Kind.RECALL).defer("embedding")
    if fact_ids:
        qs = qs.filter(id__in=list(fact_ids))
    else:
        qs = qs.filter(asserted_at__gte=timezone.now() - timedelta(days=settings.UNSAY_NOTICE_LOOKBACK_DAYS))
    qs = qs.exclude(id__in=Fact.objects.filter(superseded_by__isnull=False).values("superseded_by_id"))
    facts = list(qs.order_by("id"))
    owed = owed_recalls({recall_number(f) for f in facts if not is_active(f)})
    return [fact for fact in facts if is_active(fact) or recall_number(fact) in owed]


def notice_pairs(fact_ids=None) -> list[tuple[Fact | None, Fact]]:
    """(before, believed now) for recall facts that got worse or are new."""
    pairs = {(old.id, new.id): (old, new) for old, new in worsened_pairs(fact_ids)}
    pairs.update({(0, new.id): (None, new) for new in new_recall_facts(fact_ids)})
    return list(pairs.values())


# Pending notices that name a fact version no longer believed (their trigger, or any of the lots
# they name): the periodic catch-all for a change whose own sweep did not run.
_NAMING_RETRACTED = (
    f"SELECT c.patient_id, c.recall_number FROM {Correction._meta.db_table} c WHERE c.kind = %s "
    "AND c.status = ANY(%s) AND EXISTS (SELECT 1 FROM memory_fact f WHERE f.retracted_at IS NOT NULL AND "
    "(f.id = c.trigger_fact_id OR f.id IN (SELECT (e.value ->> 'fact')::bigint "
    "FROM jsonb_array_elements(c.matched_lots) AS e)))")


def pending_notices_to_review(fact_ids=None) -> set[tuple[int, str]]:
    """(patient id, recall number) of pending notices a change may have overtaken: with fact_ids,
    those about the recalls of these facts; without, those naming a fact version no longer believed."""
    pending = Correction.objects.filter(kind=Correction.Kind.NOTICE, status__in=PENDING)
    if fact_ids:
        numbers = {recall_number(f) for f in Fact.objects.filter(id__in=list(fact_ids), kind=Fact.Kind.RECALL)
                   .only("fact_key", "attributes")} - {""}
        return set(pending.filter(recall_number__in=sorted(numbers)).values_list("patient_id", "recall_number"))
    with connection.cursor() as cursor:
        cursor.execute(_NAMING_RETRACTED, [Correction.Kind.NOTICE.value, list(PENDING)])
        return {(patient_id, number) for patient_id, number in cursor.fetchall()}


def pending_notices_of(patient_ids) -> set[tuple[int, str]]:
    return set(Correction.objects.filter(kind=Correction.Kind.NOTICE, status__in=PENDING,
                                         patient_id__in=list(patient_ids))
               .values_list("patient_id", "recall_number"))


def exposed_patients_of(fact: Fact, *, who_never_asked: bool = False):
    """[(patient, "lot"|"drug", match class, dispensing rows that matched)] from
    patients.services.exposed_patients; who_never_asked: without the rows whose patient has a standing
    decision about that medicine resting on a scope this fact touches, in the same query (askers_owed
    finds those of them still owed a letter)."""
    unless = list(fact.scopes or []) if who_never_asked else None
    return [(e.patient, "lot" if e.match == Match.LOT else "drug", str(e.match_class or ""), e.dispensings)
            for e in exposed_patients(fact, unless_standing_on=unless)]


def askers_owed(facts, number: str) -> set[int]:
    """Patients whose standing answer is affected (caution or stop) and rests on one of these facts,
    with no pending correction about the recall: what they read in the app is all they have."""
    corrected = Correction.objects.filter(patient_id=OuterRef("patient_id"), recall_number=number,
                                          kind=Correction.Kind.CORRECTION, status__in=PENDING)
    return set(Decision.objects.standing()
               .filter(verdict__in=AFFECTED, patient_id__isnull=False, read_set__members__load_bearing=True,
                       read_set__members__fact_id__in=[f.id for f in facts])
               .exclude(Exists(corrected)).values_list("patient_id", flat=True).distinct())


def notice_question(rows) -> tuple[str, str]:
    """(question, subject) a notice is decided with: about the medicine as it was dispensed (the matched
    row's own identity and the text the pharmacy typed), never the recall's name for it: a pack typed
    "LOSART POT 50MG TAB" with the recalled NDC and lot is this patient's losartan, whatever the recall
    calls it."""
    row = next((r for r in rows if r.drug), rows[0] if rows else None)
    subject = row.drug if row is not None else ""
    named = ((row.drug_text or "").strip() if row is not None else "") or readable(subject) or "medicine"
    return f"Is my {named} safe?", subject


@dataclass
class RecallCheck:
    """One recall whose patients a sweep looks at."""

    number: str
    changed: dict[int, Fact] = field(default_factory=dict)  # new or worse versions: their exposed patients
    previous: dict[int, Fact | None] = field(default_factory=dict)  # changed fact id -> the version before
    patient_ids: set[int] = field(default_factory=set)  # looked at whatever exposure says
    # A fact of the recall changed: whoever holds a pending notice about it is looked at too (it may
    # no longer say what holds). Not for a dispensing change: that concerns its own patients only.
    facts_changed: bool = False

    @property
    def size(self) -> int:
        """Progress units: the recall facts checked (a patients-only check counts one)."""
        return max(1, len(self.changed))


def recall_checks(fact_ids=None, patient_ids=None, *, by_facts: bool) -> list[RecallCheck]:
    """What the notice step of a sweep looks at (see the module docstring), per recall. by_facts: a
    sweep of changed facts, or of everything (fact_ids None)."""
    checks: dict[str, RecallCheck] = {}

    def check(number: str) -> RecallCheck:
        return checks.setdefault(number, RecallCheck(number))

    if by_facts:
        for previous, current in notice_pairs(fact_ids):
            entry = check(recall_number(current))
            entry.changed[current.id] = current
            entry.previous.setdefault(current.id, previous)
            entry.facts_changed = True
        for patient_id, number in pending_notices_to_review(fact_ids):
            entry = check(number)
            entry.patient_ids.add(patient_id)
            entry.facts_changed = True
    if patient_ids:
        # Dispensing registered or corrected after a recall: the patient may never have asked.
        for patient_id, number in [*situations(patient_ids), *pending_notices_of(patient_ids)]:
            check(number).patient_ids.add(patient_id)
    return [checks[number] for number in sorted(checks) if number]


def notice_pass(scope: Scope, decider, run, *, dry_run: bool, progress=None) -> SweepReport:
    """The sweep's last step, once its pages are done: settle the letters of every patient the scope's
    changes reach (see the module docstring), recall by recall. Returns what it did, its reasoner
    runs included. progress: optional callable(done, total), recall facts whose patients have been
    settled, of how many; first called with done = 0."""
    decider.reset()
    calls_before = decider.calls
    settling = _Settling(decider, run, dry_run=dry_run)
    # Every recall whose patients are looked at, known before the first is settled: every exposed
    # patient found affected ends with one reviewed letter about it.
    checks = recall_checks(list(scope.fact_ids) if scope.fact_ids else None, scope.patient_ids,
                           by_facts=bool(scope.fact_ids or scope.everything))
    units, done = sum(check.size for check in checks), 0
    if progress:
        progress(0, units)
    for check in checks:
        settling.settle_recall(check)
        done += check.size
        if progress:
            progress(done, units)
    report = settling.report
    report.reasoner_calls = decider.calls - calls_before
    if run is not None and report.reasoner_calls:
        save_run_progress(run, SweepReport(reasoner_calls=report.reasoner_calls,
                                           already_handled=report.already_handled))
    return report


class _Settling:
    """One notice pass: what it settles with (the sweep's decider and run) and what it did so far."""

    def __init__(self, decider, run, *, dry_run: bool):
        self.decider, self.run, self.dry_run = decider, run, dry_run
        self.report = SweepReport()
        self.drafted = 0  # notices written, counted for the crash-replay tests' fault point

    def settle_recall(self, check: RecallCheck):
        """Bring every looked-at patient's letters about one recall in line (corrections.recall_letters):
        planned on what is read, then, only for a patient with something to do, re-planned and written in
        one transaction per patient with their letters locked."""
        patient_ids = set(check.patient_ids)
        if check.facts_changed:  # a pending notice may no longer say what holds, or a correction tells them now
            patient_ids.update(Correction.objects.filter(
                kind=Correction.Kind.NOTICE, status__in=PENDING, recall_number=check.number,
            ).values_list("patient_id", flat=True))
        for fact in check.changed.values():
            patient_ids.update(patient.id for patient, *_ in exposed_patients_of(fact, who_never_asked=True))
        if check.changed:
            patient_ids.update(askers_owed(check.changed.values(), check.number))
        ordered = sorted(patient_ids)
        for start in range(0, len(ordered), CHUNK):
            chunk = ordered[start:start + CHUNK]
            found = situations(chunk, {check.number})
            letters: dict[int, list] = {}
            for letter in (Correction.objects.filter(patient_id__in=chunk, recall_number=check.number)
                           .exclude(status=Correction.Status.STALE).select_related("trigger_fact", "previous_fact")
                           .defer("trigger_fact__embedding", "previous_fact__embedding").order_by("id")):
                letters.setdefault(letter.patient_id, []).append(letter)
            unexposed = Patient.objects.in_bulk([pid for pid in chunk if (pid, check.number) not in found])
            answers = standing_answers(found.values())
            for patient_id in chunk:
                situation = found.get((patient_id, check.number))
                patient = situation.patient if situation is not None else unexposed.get(patient_id)
                if patient is None:
                    continue
                self._settle_one(check, situation, patient, letters.get(patient_id, []), answers.get(patient_id))

    def _settle_one(self, check, situation, patient, letters, answer):
        outcome = None
        corrected = any(c.kind == Correction.Kind.CORRECTION and c.status in PENDING for c in letters)
        if situation is not None and not corrected:  # a pending correction tells them, whatever the verdict
            outcome = answer
            if outcome is None:
                question, subject = notice_question(situation.rows)
                outcome, _shared = self.decider.decide(patient, question, subject or situation.strongest.fact.subject)
        previous = check.previous.get(situation.strongest.fact.id) if situation is not None else None
        todo = plan(situation, outcome.verdict if outcome is not None else "", letters, previous=previous)
        if not todo.stale and not todo.draft:
            return
        if self.dry_run:
            if todo.draft:
                self.report.notices += 1
                self.report.preview.append({"notice": True, "patient_ref": patient.external_ref,
                                            "match": situation.match, "new_verdict": outcome.verdict,
                                            "recall_number": check.number})
            return

        run = self.run

        def write():
            settled = settle(situation, outcome, patient=patient, recall_number=check.number, run=run,
                             previous=previous)
            delta = SweepReport(notices=int(settled.drafted is not None), already_handled=int(settled.already_handled))
            if run is not None and delta.notices:
                save_run_progress(run, SweepReport(notices=delta.notices))  # already_handled: once, by the sweep
            return delta

        try:
            delta = run_in_transaction(write)
        except IntegrityError:
            self.report.already_handled += 1  # a concurrent sweep wrote this notice first
            return
        self.report.add(delta)
        if delta.notices:
            self.drafted += 1
            faults.maybe_crash("mid_notices", self.drafted)


def standing_answers(found) -> dict[int, Decision]:
    """patient id -> their latest standing decision about the medicine a situation matched, when it
    is not stale: the answer they read in the app, which is the decision now (a notice says it again,
    reviewed, without deciding it twice). Two queries for a chunk of patients."""
    wanted = {(s.patient.pk, notice_question(s.rows)[1]) for s in found}
    subjects = {subject for _pid, subject in wanted if subject}
    if not subjects:
        return {}
    latest: dict[int, Decision] = {}
    for decision in (Decision.objects.standing().filter(patient_id__in=sorted({pid for pid, _s in wanted}),
                                                         subject__in=sorted(subjects))
                     .only("id", "patient_id", "subject", "verdict", "answer").order_by("id")):
        if (decision.patient_id, decision.subject) in wanted:
            latest[decision.patient_id] = decision
    reasons = staleness.stale_reasons([d.id for d in latest.values()])
    return {pid: d for pid, d in latest.items() if not reasons[d.id]}
