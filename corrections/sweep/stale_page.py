"""One page of the stale set, locked and read for re-deciding: its decisions with their patients, why
each is stale (the facts, read once for the page) and the pending drafts that produced any of them.
Both paths of a page (corrections.sweep.pages, corrections.sweep.one_by_one) work from this."""

from dataclasses import dataclass

from django.db import connection

from memory.models import Decision, Fact
from patients.selectors import attach_patients
from recalls.selectors import prefetch as prefetch_texts

from ..models import Correction
from . import staleness
from .staleness import Scope

# Timestamps no re-decision reads (a page parses ~4 per decision otherwise); a new decision replaces the
# old one by its id, and a letter names the patient, not when they were registered.
_PAGE_UNREAD = ("decided_at", "superseded_at", "created")
_PATIENT_UNREAD = ("created", "updated")


@dataclass
class StalePage:
    ids: list[int]                 # the locked decisions still stale, in id order
    decisions: list[Decision]      # the same, with .patient set (patients.selectors)
    reasons: dict[int, dict]       # decision id -> page_reasons' entry
    pending: dict[int, Correction]  # decision id -> the unsent draft that produced it (pending_corrections)


def read_page(scope: Scope, *, among=None, after: int = 0, limit: int, lock: bool) -> StalePage | None:
    """Lock and read one page (None: nothing of it is stale any more). `among`: the page's slice of the
    stale set read when the sweep began (its ids are checked again and locked here); None: the next
    keyset page after `after` of the stale set as it is now. lock: a sweep that writes (not a dry run)."""
    if lock:
        set_page_snapshot()
    if among is not None:
        ids, raw_reasons = staleness.lock_stale_among(among, scope, lock=lock)
    else:
        ids = staleness.stale_decision_ids(after=after, limit=limit, scope=scope, lock=lock)
        raw_reasons = None
    if not ids:
        return None
    # The page's patients in one more query (a decision holds its patient by id: patients.selectors).
    decisions = attach_patients(Decision.objects.filter(id__in=ids).defer(*_PAGE_UNREAD).order_by("id"),
                                defer=_PATIENT_UNREAD)
    return StalePage(ids, decisions, page_reasons(decisions, scope, raw=raw_reasons),
                     pending_corrections(ids, lock=lock))


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
