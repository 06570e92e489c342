"""One stale decision: re-decide it through ask.services.decide (shared between decisions with identical
inputs), and draft a correction where the verdict moved (per-decision path; corrections.sweep_pages writes
the same rows for a whole page)."""

from dataclasses import dataclass, field

from django.db import connection
from django.utils import timezone

from drugs.matching import CERTAINTY_RANK
from drugs.recall_terms import is_active, severity
from memory.models import Fact
from recalls.selectors import prefetch as prefetch_texts

from . import staleness
from .drafting import correction_text
from .drafts import coalesce, draft_key, mark_stale, write_draft
from .models import Correction, Redecision, SweepRun
from .recall_letters import latest_version, settle, situations
from .staleness import Scope


def question_key(question: str) -> str:
    return " ".join(question.lower().split())


def reference_of(patient) -> str | None:
    """How a dry run's preview names a decision's patient: the pharmacy's reference, never the name."""
    return patient.external_ref if patient is not None else None


@dataclass
class SweepReport:
    examined: int = 0
    reaffirmed: int = 0
    corrected: int = 0
    notices: int = 0
    already_handled: int = 0
    reasoner_calls: int = 0
    errors: int = 0
    pages: int = 0
    set_pages: int = 0  # pages written by the set-based path (corrections.sweep_pages); not on the run row
    error_text: list[str] = field(default_factory=list)
    # dry run: what would change, each patient by reference only (`manage.py sweep --dry-run` prints it)
    preview: list[dict] = field(default_factory=list)
    run: SweepRun | None = None

    def add(self, other: "SweepReport"):
        for name in ("examined", "reaffirmed", "corrected", "notices", "already_handled", "reasoner_calls",
                     "errors", "pages", "set_pages"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.error_text.extend(other.error_text)
        self.preview.extend(other.preview)

    def summary(self) -> str:
        return (f"examined {self.examined}, reaffirmed {self.reaffirmed}, corrected {self.corrected}, "
                f"notices drafted {self.notices}, already handled {self.already_handled}, "
                f"reasoner calls {self.reasoner_calls}, errors {self.errors}")


def _keyed(row) -> tuple:
    return (row.drug, row.decision_inputs(), row.id, row.fingerprint)


class SharedDecider:
    """Calls ask.services.decide, sharing one result between decisions whose inputs are identical.

    The reasoner sees (question, subject, the patient's lots, NDCs, dispensing and expiry dates of that
    drug, the patient's drugs, the believed facts retrieved). Within one page the sweep reads a single
    snapshot (REPEATABLE READ), so the retrieval is a function of the first four; the key is exactly
    those four. (Anything the rules read from a dispensing row must be in the key: two patients who
    differ only in an expiry date can differ in verdict under a recall of every lot in a window.)
    """

    def __init__(self, reasoner=None):
        self.calls = 0  # reasoner runs (SweepRun.reasoner_calls)
        self.reasoner = reasoner  # None: the configured one (UNSAY_REASONER)
        self._cache: dict[tuple, object] = {}
        self._dispensed: dict[int, frozenset] = {}

    def reset(self):
        self._cache.clear()
        self._dispensed.clear()

    def preload(self, patient_ids):
        from ask.beliefs import ROW_COLUMNS, DispensedRow
        from patients.models import DispensingRecord

        rows: dict[int, list] = {pid: [] for pid in patient_ids if pid not in self._dispensed}
        if not rows:
            return
        # The rows exactly as a decision reads them (ask.beliefs.DispensedRow): what they hold is the
        # inputs; ids and fingerprints are what the decision records.
        for pid, *values in DispensingRecord.objects.filter(patient_id__in=list(rows)).order_by("id").values_list(
                "patient_id", *ROW_COLUMNS):
            rows[pid].append(_keyed(DispensedRow(*values)))
        self._dispensed.update(rows)

    def preload_from(self, beliefs):
        """The same rows, from a ask.beliefs.PageBeliefs that has read them already."""
        for pid, records in beliefs.records.items():
            if pid not in self._dispensed:
                self._dispensed[pid] = [_keyed(r) for r, _product in records]

    def inputs_key(self, patient, question: str, subject: str) -> tuple:
        self.preload([patient.pk])
        dispensed = self._dispensed[patient.pk]
        drugs = frozenset(d for d, *_ in dispensed)
        contents = frozenset(inputs for d, inputs, _i, _f in dispensed if not subject or d == subject)
        return (question_key(question), subject or "", contents, drugs)

    def decide(self, patient, question: str, subject: str, *, beliefs=None, unshared=None):
        """(outcome, shared). `beliefs`: what decide() reads from (ask.beliefs; None: the database).
        `unshared`: what decides when no identical inputs were decided yet (default ask.services.decide;
        a set-based page hands in its grouped decider, corrections.sweep_groups.PageDecider)."""
        from ask.services import decide, rebind_inputs

        key = self.inputs_key(patient, question, subject)
        cached = self._cache.get(key)
        if cached is not None:
            # Same verdict and reads; the dispensing rows it rests on are this patient's own.
            rows = [(i, f) for d, _inputs, i, f in self._dispensed[patient.pk] if d == subject]
            return rebind_inputs(cached, question, rows), True
        if unshared is not None:
            outcome = unshared(patient, question, subject)  # counts its own reasoner runs in self.calls
        else:
            self.calls += 1
            outcome = decide(patient, question, subject=subject or None, reasoner=self.reasoner, beliefs=beliefs)
        self._cache[key] = outcome
        return outcome, False


def set_page_snapshot():
    if connection.vendor == "postgresql":
        # One snapshot per page: identical inputs really do see identical beliefs. No parallel workers:
        # a page's queries are small, and the planner was starting two workers (new processes) per page
        # for its stale-reasons union, on cores the sweeps themselves need (+1-6% decisions/s).
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; "
                           "SET LOCAL max_parallel_workers_per_gather = 0")


def page_reasons(decisions, scope: Scope, *, raw=None) -> dict[int, dict]:
    """decision id -> {"retracted": [fact], "new": [fact], "dispensing": bool} for one page.
    `raw`: staleness.StaleReason lists already read for these decisions."""
    reasons = raw if raw is not None else staleness.stale_reasons([d.id for d in decisions], scope)
    fact_ids = {r.fact_id for rs in reasons.values() for r in rs if r.fact_id}
    facts = Fact.objects.defer("embedding").in_bulk(list(fact_ids))
    prefetch_texts(facts.values())  # the page's letters and diffs read the recall texts: one query
    out = {}
    for decision_id, rs in reasons.items():
        out[decision_id] = {
            "retracted": [facts[r.fact_id] for r in rs if r.kind == staleness.RETRACTED_READ],
            "new": [facts[r.fact_id] for r in rs if r.kind == staleness.NEW_FACT],
            "dispensing": any(r.kind == staleness.DISPENSING_CHANGED for r in rs),
        }
    return out


def pick_trigger(reasons: dict, latest: dict) -> tuple[Fact | None, Fact | None]:
    """(previous, trigger): what the patient's answer rested on and what is believed now, the most
    severe change first. A retracted read pairs with its current version; a new fact has no
    previous; a dispensing change alone has neither. `latest` caches latest_version per page."""
    pairs = []
    for old in reasons["retracted"]:
        if old.id not in latest:
            latest[old.id] = latest_version(old)
        pairs.append((old, latest[old.id]))
    pairs.extend((None, new) for new in reasons["new"])
    if not pairs:
        return None, None
    pairs.sort(key=lambda p: (severity(p[1]), is_active(p[1]), (p[1] or p[0]).id), reverse=True)
    return pairs[0]


# One index probe per page id (LATERAL ... LIMIT 1 cannot be turned into one scan of the table). The
# plain `new_decision_id = ANY(ids) ... LIMIT 1` was planned as a sequential scan whenever the table's
# statistics were older than its drafts, as on a new install's first large recall (8.5 ms a page at
# 10,000 drafts); so was `EXISTS` over the ids (one scan, materialized).
PENDING_PROBE_SQL = ("SELECT 1 FROM unnest(%s::bigint[]) AS page(decision_id) CROSS JOIN LATERAL ("
                     f"SELECT 1 FROM {Correction._meta.db_table} c WHERE c.new_decision_id = page.decision_id "
                     "AND c.status = ANY(%s) LIMIT 1) AS pending LIMIT 1")


def pending_corrections(decision_ids, *, lock: bool) -> dict[int, Correction]:
    """Drafts (or approved but unsent corrections) that produced these decisions, by decision id:
    the patient has not heard them yet. One query per page."""
    decision_ids = list(decision_ids)
    with connection.cursor() as cursor:
        # Usually there are none: one indexed probe before the ORM query.
        cursor.execute(PENDING_PROBE_SQL,
                       [decision_ids, [Correction.Status.DRAFT.value, Correction.Status.APPROVED.value]])
        if cursor.fetchone() is None:
            return {}
    qs = Correction.objects.select_for_update(of=("self",)) if lock else Correction.objects
    found = (qs.select_related("old_decision", "previous_fact").defer("previous_fact__embedding")
             .filter(new_decision_id__in=list(decision_ids),
                     status__in=[Correction.Status.DRAFT, Correction.Status.APPROVED]))
    return {c.new_decision_id: c for c in found}


def change_token(trigger, previous, outcome) -> str:
    """What changed, for the dedupe key: the fact version believed now, a bare retraction, or the
    dispensing the new decision rests on."""
    if trigger is not None:
        return str(trigger.id)
    if previous is not None:
        return f"retracted-{previous.id}"
    return f"inputs-{outcome.inputs_hash}"


def letter_fact(trigger, previous, outcome):
    """(the fact a letter is about, whether what changed was the dispensing). A dispensing change has
    no fact of its own: the letter is about the most severe fact the new answer rests on."""
    if trigger is not None or previous is not None:
        return trigger, False
    bearing = [r.fact for r in outcome.retrieved if r.fact.id in outcome.load_bearing_ids]
    return max(bearing, key=lambda f: (severity(f), f.id), default=None), True


def redecide(decision, reasons, decider, run, report, *, dry_run, pending, latest, drafted_keys):
    previous, trigger = pick_trigger(reasons, latest)
    outcome, shared = decider.decide(decision.patient, decision.question, decision.subject)
    token = change_token(trigger, previous, outcome)
    trigger, dispensing_changed = letter_fact(trigger, previous, outcome)
    recall_number = ((trigger or previous).attributes or {}).get("recall_number", "") if (trigger or previous) else ""
    # If this decision came from a correction the patient has not received yet, that draft goes
    # stale, and the comparison is with what the patient was actually told before it.
    replaced = None
    if pending is not None and (dry_run or mark_stale(pending, run=run, note=f"decision {decision.id} re-decided")):
        replaced = pending
    told = replaced.old_decision if replaced else decision
    told_verdict = replaced.old_verdict if replaced else decision.verdict
    told_answer = replaced.old_answer if replaced else decision.answer
    if replaced is not None and replaced.previous_fact_id:
        previous = replaced.previous_fact
    changed = outcome.verdict != told_verdict
    key = draft_key(decision.patient_id, decision.subject, outcome.verdict, token)
    coalesced = False
    if changed:
        earlier = None if key in drafted_keys else Correction.objects.filter(dedupe_key=key).values_list(
            "status", flat=True).first()
        key, coalesced = coalesce(key, earlier, drafted_keys, decision.id)
    report.examined += 1
    if changed:
        report.corrected += 1
    else:
        report.reaffirmed += 1
    if dry_run:
        if not coalesced:
            report.preview.append({
                "decision": decision.id, "patient_ref": reference_of(decision.patient), "question": decision.question,
                "old_verdict": told_verdict, "new_verdict": outcome.verdict, "changed": changed,
                "recall_number": recall_number,
            })
            drafted_keys.add(key)
        return
    from ask.services import record_outcome

    new_decision = record_outcome(outcome, patient=decision.patient, question=decision.question, replaces=decision)
    drafted_about = None  # the recall of the correction that tells the patient of this change, if any
    if changed:
        drafted_about = ((trigger or previous).attributes or {}).get("recall_number", "") if (trigger or previous) \
            else ""
    if changed and not coalesced:
        match_class = match_class_for(decision.patient, decision.subject,
                                      [r.fact for r in outcome.retrieved if r.fact.id in outcome.load_bearing_ids])
        text = correction_text(decision.patient, told_verdict, outcome, trigger or previous, previous,
                               match_class=match_class, dispensing_changed=dispensing_changed)
        write_draft(kind=Correction.Kind.CORRECTION, patient=decision.patient, match=Correction.Match.ASKED,
                     trigger=trigger, previous=previous, old_decision=told, new_decision=new_decision,
                     old_verdict=told_verdict, old_answer=told_answer, new_verdict=outcome.verdict,
                     new_answer=outcome.answer, key=key, text=text, run=run, replaces=replaced,
                     match_class=match_class)
    if replaced is not None and replaced.recall_number and replaced.recall_number != drafted_about:
        report.notices += replace_with_notice(replaced, decision.patient, outcome, run)
    Redecision.objects.create(
        old_decision=decision, new_decision=new_decision,
        outcome=Redecision.Outcome.CORRECTED if changed else Redecision.Outcome.REAFFIRMED,
        recall_number=recall_number, trigger_fact=trigger, sweep_run=run, shared=shared or coalesced,
    )
    if changed:
        drafted_keys.add(key)  # only once every write of this decision succeeded


def replace_with_notice(replaced: Correction, patient, outcome, run) -> int:
    """A pending correction was staled and no correction about its recall took over (the verdict came
    back to what the app told the patient, or the new correction is about another recall): while they
    are still owed a letter about that recall, a notice replaces it in this transaction
    (corrections.recall_letters). Returns the notices drafted."""
    number = replaced.recall_number
    situation = situations([patient.pk], {number}).get((patient.pk, number))
    settled = settle(situation, outcome if situation is not None else None, patient=patient, recall_number=number,
                     run=run, replacing=replaced)
    return int(settled.drafted is not None)


def match_class_for(patient, subject: str, facts) -> str:
    """The strongest drugs.matching class between these recall facts and the patient's dispensing."""
    rows = [r.as_dispensed() for r in patient.dispensings.filter(drug=subject)] if subject else []
    return strongest_match(rows, facts)


def strongest_match(rows, facts) -> str:
    """The strongest drugs.matching class between these facts and these dispensing rows (drugs.matching.Dispensed)."""
    from drugs.matching import match

    found = {str(m) for fact in facts if fact is not None for row in rows if (m := match(fact, row))}
    return min(found, key=CERTAINTY_RANK.get, default="")


def save_run_progress(run: SweepRun, delta: SweepReport, *, last_id: int | None = None):
    from django.db.models import F

    values = {name: F(name) + getattr(delta, name) for name in (
        "examined", "reaffirmed", "corrected", "notices", "already_handled", "reasoner_calls", "errors", "pages")}
    values["heartbeat"] = timezone.now()
    if last_id is not None:
        values["last_decision_id"] = last_id
    if delta.error_text:
        run.error_text = (run.error_text + "\n" + "\n".join(delta.error_text)).strip()[-10000:]
        values["error_text"] = run.error_text
    SweepRun.objects.filter(pk=run.pk).update(**values)

