"""One reviewed letter per patient and recall.

A patient whose pack may be from a recalled lot, or whose medicine a drug-level recall covers
(drugs.matching, the rule exposure reads), and whom the decision logic finds affected (caution or
stop), is owed one pharmacist-reviewed letter about that recall: the correction a re-decision
drafted when it moved the answer they had been given, or else a notice. An answer read in the app
is not a reviewed letter and never stands in for one, whatever the recall's class (ADR 0011). One
pack that may match several lots of one recall (a lot typed without the recall's "-1" is a near
miss of "-1" and "-2") gets one notice, about the strongest match, whose row names them all
(Correction.matched_lots).

A patient's letters about a recall (Correction.recall_number), and what each means now:
  pending  draft or approved. A pending correction belongs to its decision, whose re-decision keeps
           it current: while there is one, the patient needs no notice about its recall. A pending
           notice covers the patient only while it says what would be drafted now: the same fact
           versions (believed ones only), verdict and match class. Otherwise it is staled, and in the
           same transaction replaced while the patient is still owed a letter.
  heard    sent, or rejected by a pharmacist (their call stands until something is news). Covers
           unless the situation is news to the patient: a graver verdict, a graver class or a
           reopened recall (still_news), or a lot of the recall the letter did not name (another
           pack; a second fill of a lot it named is not news).
  stale    never heard: ignored.
A patient no longer exposed, or no longer found affected, has their pending notices staled and gets
none. A recall already closed when we first learned of it owes no letter by itself (a history load
must not flood the review queue); once we have believed it active, closing it changes nothing: FDA
terminates a recall when the removal is complete, not because a dispensed pack became safe.
"""

import operator
from collections import defaultdict
from dataclasses import dataclass, field
from functools import reduce

from django.db.models import Q

from drugs import recall_terms
from drugs.lots import canonical_lot
from drugs.matching import CERTAINTY_RANK, explain, stated_class
from drugs.recall_terms import is_active, severity
from drugs.scopes import dispensing_scopes
from memory.models import Decision, Fact, ReadSetMember
from patients.models import DispensingRecord

from .drafting import notice_text
from .drafts import dedupe_key, mark_stale, notice_key, write_draft
from .models import Correction

AFFECTED = (Decision.Verdict.CAUTION.value, Decision.Verdict.STOP.value)
PENDING = (Correction.Status.DRAFT.value, Correction.Status.APPROVED.value)
HEARD = (Correction.Status.SENT.value, Correction.Status.REJECTED.value)
GRAVITY = {"safe": 0, "unknown": 1, "caution": 2, "stop": 3}


# --- what is news ----------------------------------------------------------------------------------


def worsened(before: Fact | None, after: Fact | None) -> bool:
    """A recall got worse for patients: more severe class, or back to active."""
    if after is None or after.kind != Fact.Kind.RECALL or not is_active(after):
        return False
    if before is None or not is_active(before):
        return True
    return severity(after) > severity(before)


def still_news(baseline: Fact | None, current: Fact) -> bool:
    """Whether a letter about `current` tells a patient who heard of `baseline` something new: they
    never heard of the recall, it got worse, or it is now of a graver class (closed or not: closing
    a recall does not end it for a patient who holds the recalled lot)."""
    return baseline is None or worsened(baseline, current) or severity(current) > severity(baseline)


def latest_version(fact: Fact) -> Fact | None:
    """Follow superseded_by to the version believed now (None if the chain ends in a bare retraction)."""
    current = fact
    seen = 0
    while current.retracted_at is not None:
        if not current.superseded_by_id or seen > 1000:
            return None
        current = Fact.objects.defer("embedding").get(pk=current.superseded_by_id)
        seen += 1
    return current


# --- a patient's packs and one recall --------------------------------------------------------------


@dataclass(frozen=True)
class Matched:
    """One believed fact of the recall and the patient's dispensing rows it may apply to."""

    fact: Fact
    klass: str  # drugs.matching.MatchClass: the strongest over the rows
    rule: str
    rows: tuple

    def strength(self) -> tuple:
        # The strongest first: the surest match, the pack's own lot before a near miss of it, the
        # gravest class, then the oldest fact.
        exact = bool(self.fact.lot) and any(canonical_lot(row.lot) == canonical_lot(self.fact.lot) for row in self.rows)
        return CERTAINTY_RANK.get(self.klass, len(CERTAINTY_RANK)), not exact, -severity(self.fact), self.fact.id


@dataclass
class Situation:
    """A patient's packs that may be from one recall, strongest match first."""

    patient: object
    recall_number: str
    matched: list[Matched] = field(default_factory=list)

    @property
    def strongest(self) -> Matched:
        return self.matched[0]

    @property
    def fact_ids(self) -> list[int]:
        return sorted(m.fact.id for m in self.matched)

    @property
    def rows(self) -> list:
        """The matched rows, those of the strongest match first (the notice's question reads them)."""
        seen, rows = set(), []
        for m in self.matched:
            for row in m.rows:
                if row.id not in seen:
                    seen.add(row.id)
                    rows.append(row)
        return rows

    @property
    def match(self) -> str:
        fact = self.strongest.fact
        return Correction.Match.LOT if fact.lot and not recall_terms.is_drug_level(fact) else Correction.Match.DRUG

    @property
    def match_class(self) -> str:
        return self.strongest.klass

    def lots(self) -> list[str]:
        """The recalled lots the pack may be, strongest match first."""
        return list(dict.fromkeys(m.fact.lot for m in self.matched if m.fact.lot))

    def recorded(self) -> list[dict]:
        """Correction.matched_lots."""
        return [{"fact": m.fact.id, "fact_key": m.fact.fact_key, "lot": m.fact.lot or "", "match_class": m.klass,
                 "rule": m.rule, "dispensing": sorted(row.id for row in m.rows)} for m in self.matched]


def situations(patient_ids, recall_numbers=None) -> dict[tuple[int, str], Situation]:
    """(patient id, recall number) -> Situation, for the recalls (all, or `recall_numbers`) a letter
    is owed about. A fact touches a dispensing only if they share a scope (drugs.scopes), and
    drugs.matching.explain decides, as exposure does; closed recalls are read too (see the module
    docstring). Two queries: the patients' dispensing, the believed recall facts sharing a scope."""
    records = list(DispensingRecord.objects.filter(patient_id__in=list(patient_ids)).select_related("patient")
                   .order_by("patient_id", "dispensed_at", "id"))
    scoped = []
    for row in records:
        dispensed = row.as_dispensed()
        lot = dispensed.lot if dispensed.lot_known else ""
        scoped.append((row, dispensed, set(dispensing_scopes(dispensed.drug, lot, dispensed.ndc_product,
                                                             dispensed.lot_alternatives))))
    wanted = sorted(set().union(*(scopes for _row, _d, scopes in scoped)))
    if not wanted:
        return {}
    facts = Fact.objects.believed().defer("embedding").filter(kind=Fact.Kind.RECALL, scopes__overlap=wanted)
    if recall_numbers is not None:
        facts = facts.filter(reduce(operator.or_, (Q(fact_key__startswith=recall_terms.key_prefix(number))
                                                   for number in sorted(recall_numbers)), Q(pk__in=[])))
    by_scope = defaultdict(list)
    for fact in facts:
        number = recall_terms.recall_number(fact)
        if recall_numbers is None or number in recall_numbers:
            for scope in fact.scopes or ():
                by_scope[scope].append(fact)
    found: dict[tuple[int, str], dict[int, list]] = defaultdict(dict)
    for row, dispensed, scopes in scoped:
        for fact in {f.id: f for scope in scopes for f in by_scope.get(scope, ())}.values():
            how = explain(fact, dispensed)
            if how is None:
                continue
            per_fact = found[(row.patient_id, recall_terms.recall_number(fact))]
            entry = per_fact.setdefault(fact.id, [fact, how, []])
            entry[2].append(row)
            if CERTAINTY_RANK[how.klass] < CERTAINTY_RANK[entry[1].klass]:
                entry[1] = how
    # A recall with an active fact here is owed; only one closed through and through asks its history.
    active = {number for (_pid, number), per_fact in found.items()
              if any(is_active(fact) for fact, _how, _rows in per_fact.values())}
    owed = active | owed_recalls({number for _pid, number in found} - active)
    patients = {row.patient_id: row.patient for row in records}
    out = {}
    for (patient_id, number), per_fact in found.items():
        if number not in owed:
            continue
        matched = sorted((Matched(fact, str(stated_class(how.klass, fact, rows)), how.rule, tuple(rows))
                          for fact, how, rows in per_fact.values()), key=Matched.strength)
        out[(patient_id, number)] = Situation(patients[patient_id], number, matched)
    return out


def owed_recalls(recall_numbers) -> set[str]:
    """Those of these recalls that we have believed active at some time (any version of any of their
    facts): the others were already closed when we first learned of them, and owe no letter by
    themselves."""
    owed = set()
    for number in sorted(n for n in recall_numbers if n):
        statuses = Fact.objects.filter(kind=Fact.Kind.RECALL, fact_key__startswith=recall_terms.key_prefix(number)) \
            .values_list("attributes__status", flat=True)
        if any(status not in recall_terms.CLOSED_STATUSES for status in statuses):
            owed.add(number)
    return owed


# --- what to do about one patient and one recall ---------------------------------------------------


@dataclass
class Plan:
    stale: list[tuple[Correction, str]] = field(default_factory=list)  # pending notices to stale, and why
    draft: bool = False  # a new notice
    replaces: Correction | None = None  # the pending notice it takes over
    baseline: Fact | None = None  # what the patient last heard of the recall (the reviewer's diff)


def _cause(letter: Correction) -> Fact | None:
    return letter.trigger_fact or letter.previous_fact


def _named_keys(letter: Correction) -> set[str]:
    """The recall's facts (by key: any version of the same lot) a letter told the patient about: the
    lots a notice named; for a correction, those its new answer rested on (it answers for the whole
    medicine: every lot of the recall on the patient's packs)."""
    if letter.kind == Correction.Kind.NOTICE and letter.matched_lots:
        return {entry["fact_key"] for entry in letter.matched_lots}
    if letter.kind == Correction.Kind.CORRECTION and letter.new_decision_id:
        keys = set(ReadSetMember.objects.filter(read_set__decisions__id=letter.new_decision_id, load_bearing=True,
                                                fact_key__startswith=recall_terms.key_prefix(letter.recall_number))
                   .values_list("fact_key", flat=True))
        if keys:
            return keys
    cause = _cause(letter)
    return {cause.fact_key} if cause is not None else set()


def covers(notice: Correction, situation: Situation, verdict: str) -> bool:
    """A pending notice says what would be drafted now: the same fact versions, verdict and match class
    (a second fill of a lot it names changes nothing it says)."""
    named = ({entry["fact"] for entry in notice.matched_lots} if notice.matched_lots
             else {notice.trigger_fact_id} - {None})
    return (notice.new_verdict == verdict and notice.match_class == situation.match_class
            and named == set(situation.fact_ids))


def is_news(heard: Correction, situation: Situation, verdict: str) -> bool:
    """Whether the situation tells a patient who heard this letter something new: a graver verdict, a
    graver class or a reopened recall, or a lot of the recall the letter did not name (another pack)."""
    if GRAVITY.get(verdict, 0) > GRAVITY.get(heard.new_verdict, 0):
        return True
    cause = _cause(heard)
    if cause is None or any(still_news(cause, m.fact) for m in situation.matched):
        return True
    return not {m.fact.fact_key for m in situation.matched} <= _named_keys(heard)


def plan(situation: Situation | None, verdict: str, letters, *, previous: Fact | None = None) -> Plan:
    """What one patient's letters about one recall need now. `letters`: theirs, stale ones aside, in
    id order; `previous`: the version before the changed fact (the reviewer's diff, when the patient
    heard nothing of the recall)."""
    notices = [c for c in letters if c.kind == Correction.Kind.NOTICE and c.status in PENDING]
    corrections = [c for c in letters if c.kind == Correction.Kind.CORRECTION and c.status in PENDING]
    heard = [c for c in letters if c.status in HEARD]
    if situation is None:
        return Plan([(n, "the patient is no longer exposed to this recall") for n in notices])
    if corrections:  # whatever the verdict: the re-decision that keeps the correction current decides it
        told = corrections[-1]
        return Plan([(n, f"the correction #{told.pk} about this recall tells the patient") for n in notices])
    if verdict not in AFFECTED:
        return Plan([(n, "the decision logic no longer finds the patient affected by this recall")
                     for n in notices])
    kept = next((n for n in reversed(notices) if covers(n, situation, verdict)), None)
    if kept is not None:
        return Plan([(n, f"superseded by notice #{kept.pk}") for n in notices if n is not kept])
    last = heard[-1] if heard else None
    if last is not None and not is_news(last, situation, verdict):
        return Plan([(n, f"what the patient was last sent about this recall (#{last.pk}) still holds")
                     for n in notices])
    replaced = notices[-1] if notices else None
    baseline = replaced.previous_fact if replaced is not None else (_cause(last) if last is not None else previous)
    return Plan([(n, "superseded: the recall, the patient's packs or their answer changed") for n in notices],
                draft=True, replaces=replaced, baseline=baseline)


def letters_of(patient_id: int, recall_number: str, *, lock: bool):
    """The patient's letters about the recall, stale ones aside, in id order (locked: the caller stales
    and drafts in this transaction)."""
    qs = Correction.objects.select_for_update(of=("self",)) if lock else Correction.objects
    return list(qs.filter(patient_id=patient_id, recall_number=recall_number)
                .exclude(status=Correction.Status.STALE).select_related("trigger_fact", "previous_fact")
                .defer("trigger_fact__embedding", "previous_fact__embedding").order_by("id"))


@dataclass
class Settled:
    drafted: Correction | None = None
    staled: int = 0
    already_handled: bool = False  # a concurrent sweep drafted the same notice first


def settle(situation: Situation | None, outcome, *, patient, recall_number: str, run=None, replacing=None,
           previous: Fact | None = None) -> Settled:
    """Bring one patient's letters about one recall in line with `plan`, in the caller's transaction:
    stale what no longer holds and draft its replacement together, so a patient still owed a letter
    is never left without one. `outcome`: the decision now (ask.services.decide) about the matched
    medicine (None when there is no situation); `replacing`: a draft the caller staled in this
    transaction, which a new notice takes over when no pending notice does."""
    letters = letters_of(patient.pk, recall_number, lock=True)
    corrected = any(c.kind == Correction.Kind.CORRECTION and c.status in PENDING for c in letters)
    if situation is not None and outcome is None and not corrected:
        return Settled()  # decided on a pending correction that is gone: the next sweep decides again
    verdict = outcome.verdict if outcome is not None else ""
    todo = plan(situation, verdict, letters, previous=previous)
    staled = [letter for letter, note in todo.stale if mark_stale(letter, run=run, note=note)]
    if not todo.draft:
        return Settled(staled=len(staled))
    key = _free_key(notice_key(patient.pk, recall_number, verdict, situation.fact_ids))
    if key is None:
        return Settled(staled=len(staled), already_handled=True)
    replaces = todo.replaces if todo.replaces in staled else (replacing if todo.replaces is None else None)
    strongest = situation.strongest
    drafted = write_draft(
        kind=Correction.Kind.NOTICE, patient=patient, match=situation.match, trigger=strongest.fact,
        previous=todo.baseline, old_decision=None, new_decision=None, old_verdict="", old_answer="",
        new_verdict=verdict, new_answer=outcome.answer, key=key,
        text=notice_text(patient, situation.match, outcome, strongest.fact, match_class=situation.match_class,
                         lots=situation.lots(), rule=strongest.rule),
        run=run, replaces=replaces, match_class=situation.match_class, matched_lots=situation.recorded())
    return Settled(drafted=drafted, staled=len(staled))


def _free_key(key: str) -> str | None:
    """The key to draft under: `key`, or one derived from it when a letter no longer pending holds it
    (stale, sent or rejected: `plan` has found this one news). None when a pending letter holds it: a
    concurrent sweep drafted it after this one read the patient's letters."""
    for _ in range(1000):
        status = Correction.objects.filter(dedupe_key=key).values_list("status", flat=True).first()
        if status is None:
            return key
        if status in PENDING:
            return None
        key = dedupe_key(key, "again")
    raise RuntimeError("no free dedupe key after 1000 letters")
