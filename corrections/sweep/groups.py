"""Decisions of a sweep grouped by what the rules can tell apart: each group decided once per sweep.

    PageDecider   ask.services.decide for a page's decisions, once per group of the page (the first
                  member decided for real, the others stamped from it with their own lots, premises and
                  inputs); corrections.sweep.pages.plan_page decides a page through it
    SweepGroups   the groups the sweep's earlier pages decided, reused by a later page that loaded the
                  same fact versions and whose member's context reads the same

Why a group decides alike is in PageDecider's docstring; every outcome equals a fresh ask.services.decide
over the database (tests/corrections/test_sweep_set_based.py, test_sweep_groups.py).
"""

import logging
from dataclasses import dataclass, field, replace

from ask import services as ask_services
from ask.reasoners import get_reasoner
from ask.rules import date_view, reads_dates
from drugs.lots import near_lot_key, near_lot_keys
from drugs.scopes import dispensing_scopes
from memory.decisions import inputs_fingerprint

from .change import strongest_match

log = logging.getLogger(__name__)

_UNGROUPABLE = object()


def _mark(position: int) -> str:
    # PostgreSQL text cannot hold NUL, so no fact, lot or name read from the database contains this.
    return f"\x00lot{position}\x00"


def _unmark(text: str, lots) -> str:
    for position, lot in lots:
        text = text.replace(_mark(position), lot)
    return text


@dataclass
class _Group:
    outcome: object            # decided for the first member, with its inert lots marked
    versions: list             # "fact_key@version" of its reads (the inputs fingerprint's part)
    match_classes: dict = field(default_factory=dict)
    unseen: "_Unseen | None" = None


class _FactLots:
    """What a set of facts could read of a patient's lot: their lots, the near-lot keys of those
    (drugs.lots) and their scopes (drugs.scopes)."""

    def __init__(self, facts):
        self.lots = {f.lot for f in facts if f.lot}
        self.near = set().union(*(near_lot_keys(f.lot) for f in facts if f.lot))
        self.scopes = {s for f in facts for s in (getattr(f, "scopes", None) or ())}

    def reach(self, lot: str, rows, subject: str) -> bool:
        """The lot is one of theirs, near one of theirs, or a lot-level scope of its rows is theirs."""
        if lot in self.lots or near_lot_key(lot) in self.near:
            return True
        return bool(self.scopes) and any(s in self.scopes for row in rows if row.lot == lot
                                         for s in dispensing_scopes(subject, lot, row.ndc_product)
                                         if s.rsplit("|", 1)[-1] == lot)


class _Unseen:
    """The facts a group's first member read that its page did not load (semantic neighbours): the
    group key saw neither their dates nor their lots, so a member joins only if it answers their date
    comparisons as the first member did (`view`, from the first member's rows) and none of its inert
    lots is within their reach."""

    def __init__(self, facts, subject: str, rows):
        self.subject = subject
        self.dated = [f for f in facts if reads_dates(f)]
        self.lots = _FactLots(facts)
        self.view = self.date_view(rows)

    def date_view(self, rows) -> tuple:
        return tuple(date_view(self.dated, row) for row in rows) if self.dated else ()

    def inert(self, lots, rows) -> bool:
        return not any(self.lots.reach(lot, rows, self.subject) for lot in lots)

    def admits(self, rows, inert_lots) -> bool:
        return (not self.dated or self.date_view(rows) == self.view) and self.inert(inert_lots, rows)


class SweepGroups:
    """Groups decided by earlier pages of one sweep (PageDecider), by the page's believed facts and the
    group key, each with the reads its first member's context had. A later page reuses a group only
    when it loaded the very same fact versions (the key's date view and inert lots are answers about
    those facts, so equal keys mean the same only over equal facts) and its own first member's context
    reads the same versions with the same scores and matches (the semantic neighbours are read per
    page). The rules read nothing else (the key holds every other input), so the reused outcome is the
    one deciding would give; each page reads its own snapshot, so a fact changed between pages changes
    what the page loaded and the group is decided again."""

    LIMIT = 10_000  # group keys remembered; a sweep of many distinct groups starts again past it

    def __init__(self):
        self._groups: dict[tuple, tuple[tuple, _Group]] = {}
        self.reused = 0

    def get(self, key, reads: tuple):
        found = self._groups.get(key)
        if found is None or found[0] != reads:
            return None
        self.reused += 1
        return found[1]

    def put(self, key, reads: tuple, group: "_Group"):
        if len(self._groups) >= self.LIMIT:
            self._groups.clear()
        self._groups[key] = (reads, group)


def _reads(ctx) -> tuple:
    """What a context reads of the believed facts: each version, its score and match, in rank order."""
    return tuple((r.fact.id, r.fact.content_hash, r.score, r.match) for r in ctx.retrieved)


class PageDecider:
    """ask.services.decide for a page's decisions, once per group that the rules cannot tell apart.

    Two decisions of a page are in one group when they have the same question, stated subject and
    resolved subject (and the same drugs when nothing of the subject is dispensed), and dispensing
    rows of that subject equal in every attribute decide() reads (drug, NDC, stored NDC product,
    lot-unknown flag, lot) except their ids,
    fingerprints and *inert* lots, at the same places, and with dates the rules cannot tell apart:
    the same answer to every date comparison the page's believed facts make (ask.rules.date_view;
    fill times differ between any two patients, so an exact date would put each in a group of one).
    A lot is inert on the page when it is recorded (known), read cleanly from its field (no other lot
    it may mean, drugs.lot_field), is no believed fact's lot (raw or normalised, drugs.lots) and none
    of its scopes (drugs.scopes) is a scope of a believed fact the page loaded. The rules then read an
    inert lot only as text: matching compares a row's normalised
    lot with a fact's (never equal), retrieval ranks by `fact.lot in lots` (never in), scopes only
    meet facts' scopes (never met), and the answer shows the sorted lots (`", ".join`, and their
    count). So the group's first member is decided through ask.services.decide, and again from its
    context with its inert lots replaced in place by markers; when the two agree (answer with the
    markers put back, verdict, reads, load-bearing facts, guardrail) every member's outcome is that
    marked one with its own lots put in, its own premises, inputs and fingerprint.
    A group whose first member reads a fact the page did not load (a semantic neighbour, whose
    dates and lots the key did not see), or whose two decisions disagree, is decided member by
    member. A patient whose lot a recall names never has that lot inert, so a recalled lot and an
    unrecalled one never share a group."""

    def __init__(self, decider, beliefs, *, shared: SweepGroups | None = None):
        self.decider, self.beliefs = decider, beliefs
        self.shared = shared  # groups decided by the sweep's earlier pages
        self._facts_key = tuple(f.id for f in beliefs.facts)  # the believed versions this page loaded
        self._fact_ids = {f.id for f in beliefs.facts}
        # A lot equal to a recall's, a near miss of it (drugs.lots) or in its scopes is never inert.
        self._page_lots = _FactLots(beliefs.facts)
        self._groups: dict[tuple, object] = {}
        self._resolved: dict[tuple, object] = {}
        self._inert: dict[tuple, bool] = {}
        self._dated = [f for f in beliefs.facts if reads_dates(f)]
        self._date_views: dict[tuple, tuple] = {}
        self.groups_decided = 0
        self.stamped = 0  # decisions given their group's outcome (not decided themselves)

    def decide(self, patient, question: str, subject: str):
        """(outcome, shared, group key or None): SharedDecider.decide with this page's grouping."""
        found = []

        def unshared(patient, question, subject):
            outcome, key = self._grouped(patient, question, subject)
            found.append(key)
            return outcome

        outcome, shared = self.decider.decide(patient, question, subject, unshared=unshared)
        return outcome, shared, (found[0] if found else None)

    def _plain(self, patient, question, subject):
        self.decider.calls += 1
        return ask_services.decide(patient, question, subject=subject or None, reasoner=self.decider.reasoner,
                      beliefs=self.beliefs)

    def resolve(self, patient, question, subject):
        drugs = tuple(self.beliefs.patient_drugs(patient))
        key = (question, subject or "", drugs)
        if key not in self._resolved:
            self._resolved[key] = ask_services.resolve_subject(patient, question, subject or None,
                                                               beliefs=self.beliefs)[0]
        return self._resolved[key], drugs

    def _is_inert(self, resolved, lot, rows) -> bool:
        if lot in ("*", "?") or lot in self._page_lots.lots:
            return False
        if any(row.lot_alternatives for row in rows if row.lot == lot):
            return False  # a lot field read with doubt: its other readings may be a recall's lot
        key = (resolved, lot, tuple(sorted({(r.ndc_product, r.lot_known) for r in rows if r.lot == lot})))
        if key not in self._inert:
            self._inert[key] = (all(row.lot_known for row in rows if row.lot == lot)
                                and not self._page_lots.reach(lot, rows, resolved))
        return self._inert[key]

    def _grouped(self, patient, question, subject):
        resolved, drugs = self.resolve(patient, question, subject)
        if resolved is None or resolved not in self.beliefs._subjects:
            return self._plain(patient, question, subject), None
        rows = self.beliefs.dispensed_rows(patient, resolved)
        lots = sorted({row.lot for row in rows} - {""})
        inert = {lot for lot in lots if self._is_inert(resolved, lot, rows)}
        place = {lot: n for n, lot in enumerate(lots)}
        stored = self.beliefs.stored_product
        # The patient's other drugs are read only to resolve the subject (in the key as `resolved`) and,
        # with nothing of it dispensed, to say what else is on record (ask.answers.not_dispensed_answer):
        # patients holding the same drug among different others decide alike.
        key = (question, subject or "", resolved, None if rows else drugs,
               tuple(None if lot in inert else lot for lot in lots),
               tuple((r.drug, r.ndc, stored.get(r.id), r.lot_unknown, self._date_view(r), r.lot_alternatives,
                      ("inert", place[r.lot]) if r.lot in inert else r.lot) for r in rows))
        mine = [(place[lot], lot) for lot in lots if lot in inert]
        group = self._groups.get(key)
        if group is None:
            outcome, group = self._first(patient, question, subject, resolved, rows, lots, inert, mine, key)
            self._groups[key] = group
            if outcome is None:  # an earlier page's group, its reads the same on this page
                self.stamped += 1
                return self._stamp(group, question, resolved, rows, lots, mine), key
            return outcome, (key if group is not _UNGROUPABLE else None)
        if group is _UNGROUPABLE or not group.unseen.admits(rows, inert):
            return self._plain(patient, question, subject), None
        self.stamped += 1
        return self._stamp(group, question, resolved, rows, lots, mine), key

    def _date_view(self, row) -> tuple:
        key = (row.dispensed_at.date() if row.dispensed_at is not None else None, row.expiry)
        if key not in self._date_views:
            self._date_views[key] = date_view(self._dated, row)
        return self._date_views[key]

    def _first(self, patient, question, subject, resolved, rows, lots, inert, mine, key):
        """The group's first member, decided for real and with its inert lots marked; or (None, group)
        when an earlier page of the sweep decided this group and the member's context reads the same."""
        ctx = ask_services.build_context(patient, question, resolved, beliefs=self.beliefs)
        if self.shared is not None:
            earlier = self.shared.get((self._facts_key, key), _reads(ctx))
            if earlier is not None and earlier.unseen.admits(rows, inert):
                return None, earlier
        self.groups_decided += 1
        real = self._plain(patient, question, subject)  # through ask.services.decide, as every first member
        if real.subject != resolved:
            return real, _UNGROUPABLE
        # Members share its retrieval: the exact part ranks only the page's facts, where their inert
        # lots match none, and semantic neighbours depend on the question and that part alone. A
        # neighbour the page did not load was not seen by the key, so each member must answer its
        # date comparisons as the first did and hold no lot it names.
        unseen = _Unseen([r.fact for r in real.retrieved if r.fact.id not in self._fact_ids], resolved, rows)
        if not unseen.inert(inert, rows):
            return real, _UNGROUPABLE
        if not inert:
            return real, self._keep(key, ctx, _Group(real, [f"{r.fact.fact_key}@{r.fact.version}"
                                                            for r in real.retrieved], unseen=unseen))
        reasoner = get_reasoner(self.decider.reasoner)
        marked_ctx = replace(ctx, patient_lots=[_mark(n) if lot in inert else lot for n, lot in enumerate(lots)],
                             memo={})
        self.decider.calls += 1
        marked = ask_services.finish(marked_ctx, reasoner.decide(marked_ctx))
        back = replace(marked, answer=_unmark(marked.answer, mine),
                       guardrail_override=_unmark(marked.guardrail_override, mine), patient_lots=real.patient_lots)
        if _outcome_fields(back) != _outcome_fields(real):
            log.warning("sweep: a grouped decision disagreed with its own marked form; deciding its group per member")
            return real, _UNGROUPABLE
        return real, self._keep(key, ctx, _Group(marked, [f"{r.fact.fact_key}@{r.fact.version}"
                                                          for r in marked.retrieved], unseen=unseen))

    def _keep(self, key, ctx, group: "_Group") -> "_Group":
        if self.shared is not None:
            self.shared.put((self._facts_key, key), _reads(ctx), group)
        return group

    def _stamp(self, group: _Group, question, resolved, rows, lots, mine):
        o = group.outcome
        inputs = [(row.id, row.fingerprint) for row in rows]
        return replace(
            o, answer=_unmark(o.answer, mine) if mine else o.answer,
            guardrail_override=_unmark(o.guardrail_override, mine) if mine else o.guardrail_override,
            load_bearing_ids=set(o.load_bearing_ids), patient_lots=lots,
            premises=ask_services.premises_for(resolved, rows),
            inputs=inputs, inputs_hash=inputs_fingerprint(question, [f"{i}:{fp}" for i, fp in inputs] or lots,
                                                          group.versions))

    def match_class(self, key, rows, facts) -> str:
        """corrections.sweep.change.strongest_match, once per group and load-bearing facts: the facts are among the
        group's reads, so an inert lot matches none of them (see the class docstring)."""
        group = self._groups.get(key) if key is not None else None
        if not isinstance(group, _Group):
            return strongest_match(rows, facts)
        ids = tuple(sorted(f.id for f in facts if f is not None))
        if ids not in group.match_classes:
            group.match_classes[ids] = strongest_match(rows, facts)
        return group.match_classes[ids]


def _outcome_fields(o) -> tuple:
    return (o.verdict, o.answer, o.reasoner, o.subject, [(r.fact.id, r.score, r.match) for r in o.retrieved],
            sorted(o.load_bearing_ids), o.reasoner_verdict, o.guardrail_override, o.inputs_hash, o.patient_lots,
            o.premises, o.inputs)
