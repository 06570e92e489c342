"""The stale set: standing decisions that must be re-decided, as one query (never a flag).

A decision is stale when (docs/reasoning.md, "What a decision rests on"):
  retracted_read      a fact version it leaned on (load-bearing read) was retracted since;
  new_fact            a believed fact shares a scope with one of its premises and it did not read it
                      (a new recall, a lot added to a recall, a label warning, a recall re-opened);
  dispensing_changed  a dispensing row it used was edited or deleted, or a row of that drug was
                      added for the patient since.
Each branch can be narrowed to the facts or patients that changed (the triggered sweeps); the
periodic sweep runs all three unnarrowed. Branches drive from the changed side through indexes:
read_set_bearing_fact/decision_read_set, fact_believed_scopes/premise_set_scope/decision_premise_set,
decision_input_once/dispensing_patient_drug.
"""

from dataclasses import dataclass

from django.db import connection

from memory.models import Fact

RETRACTED_READ = "retracted_read"
NEW_FACT = "new_fact"
DISPENSING_CHANGED = "dispensing_changed"

def _any(column: str, values, params: list) -> str:
    """`AND column = ANY(%s)` with its parameter appended, or nothing when values is None."""
    if values is None:
        return ""
    params.append(list(values))
    return f" AND {column} = ANY(%s)"


def _after(column: str, after, params: list) -> str:
    """`AND column > %s` (the page's keyset, pushed into each branch so a page reads only what is
    left after the previous one, through (fact, decision) / (scope, decision) indexes)."""
    if not after:
        return ""
    params.append(after)
    return f" AND {column} > %s"


def _retracted_read(scope, decision_ids, standing, after=None) -> tuple[str, list]:
    # From the retracted fact to the read sets that lean on it (read_set_bearing_fact), then to those
    # sets' decisions by (read set, id) (decision_read_set): a page reads its own decisions only.
    params: list = []
    sql = ("SELECT d.id AS decision_id, m.fact_id AS fact_id, NULL::bigint AS dispensing_id "
           "FROM memory_readsetmember m JOIN memory_fact f ON f.id = m.fact_id "
           "JOIN memory_decision d ON d.read_set_id = m.read_set_id "
           "WHERE m.load_bearing AND f.retracted_at IS NOT NULL AND " + standing)
    facts = scope.fact_ids if scope.retracted_fact_ids is None else scope.retracted_fact_ids
    sql += (_any("m.fact_id", facts, params) + _any("d.id", decision_ids, params)
            + _after("d.id", after, params))
    return sql, params


# A fact reaches the premise sets that hold one of its scopes (premise_set_scope): both forms of the
# new-fact branch start here.
_FACT_TO_PREMISE_SETS = ("memory_fact f CROSS JOIN LATERAL unnest(f.scopes) AS s(scope) "
                         "JOIN memory_premisesetmember p ON p.scope = s.scope")


def _new_fact(scope, decision_ids, standing, after=None) -> tuple[str, list]:
    params: list = []
    # From the new fact's scopes to the premise sets holding them (premise_set_scope), then to those
    # sets' standing decisions (decision_premise_set). A decision resting on two of
    # the fact's scopes comes twice, as it did when premises were per decision; readers take DISTINCT.
    sql = ("SELECT d.id AS decision_id, f.id AS fact_id, NULL::bigint AS dispensing_id "
           f"FROM {_FACT_TO_PREMISE_SETS} "
           "JOIN memory_decision d ON d.premise_set_id = p.premise_set_id "
           "WHERE f.retracted_at IS NULL AND " + standing)
    sql += (_any("f.id", scope.fact_ids, params) + _any("d.id", decision_ids, params)
            + _after("d.id", after, params))
    # A plain anti-join: members are few (one row per distinct set's read, not per decision), so the
    # planner hashes them or probes read_set_member_once. Fenced with OFFSET 0 (as it was over per-decision
    # reads), the probe needs the decision row first and the planner joined premises to every decision:
    # a new recall's page took 0.2 s instead of 0.03 s at 100,000 decisions (bench/recall_to_queue.py).
    sql += (" AND NOT EXISTS (SELECT 1 FROM memory_readsetmember m "
            "WHERE m.read_set_id = d.read_set_id AND m.fact_id = f.id)")
    return sql, params


def _new_fact_probe(scope, standing, after=None) -> tuple[str, list]:
    """The new-fact branch for "is there any?" (any_stale), premise set by premise set: the changed facts
    grouped by the premise sets that hold their scopes, with the read sets that read every one of them;
    then each set's standing decisions through decision_premise_set, stopping at the first whose read set
    is not among those. Fenced (OFFSET 0) so the planner cannot fold them back into one join: as one join
    it took a scope match for common and walked every standing decision in read-set order looking for one,
    65 s at 10,000,000 decisions where the answer was the first decision of the set
    (bench/recall_to_queue.py). With nothing stale it reads the decisions of those sets once each, however
    many of the changed facts a set holds (a recall can name hundreds of lots). Its fact_id is one fact the
    decision did not read; the joined form lists every such fact."""
    params: list = [list(scope.fact_ids)]
    sql = ("SELECT d.id AS decision_id, d.fact_id AS fact_id, NULL::bigint AS dispensing_id "
           "FROM (SELECT g.premise_set_id, g.fact_ids, ARRAY(SELECT m.read_set_id FROM memory_readsetmember m "
           "WHERE m.fact_id = ANY(g.fact_ids) GROUP BY m.read_set_id "
           "HAVING count(DISTINCT m.fact_id) = cardinality(g.fact_ids)) AS read_all "
           f"FROM (SELECT p.premise_set_id, array_agg(DISTINCT f.id) AS fact_ids FROM {_FACT_TO_PREMISE_SETS} "
           "WHERE f.retracted_at IS NULL AND f.id = ANY(%s) GROUP BY p.premise_set_id) AS g OFFSET 0) AS f "
           "CROSS JOIN LATERAL (SELECT d.id, (SELECT min(x.id) FROM unnest(f.fact_ids) AS x(id) "
           "WHERE NOT EXISTS (SELECT 1 FROM memory_readsetmember m "
           "WHERE m.read_set_id = d.read_set_id AND m.fact_id = x.id)) AS fact_id "
           "FROM memory_decision d WHERE d.premise_set_id = f.premise_set_id AND " + standing)
    sql += (_after("d.id", after, params)
            + " AND (d.read_set_id IS NULL OR d.read_set_id <> ALL (f.read_all)) OFFSET 0) AS d")
    return sql, params


def _dispensing_changed(scope, decision_ids, standing, after=None) -> tuple[str, list]:
    params: list = []
    changed = ("SELECT d.id AS decision_id, NULL::bigint AS fact_id, i.dispensing_id AS dispensing_id "
               "FROM memory_decision d JOIN memory_decisioninput i ON i.decision_id = d.id "
               "LEFT JOIN patients_dispensingrecord x ON x.id = i.dispensing_id "
               "WHERE " + standing + " AND (x.id IS NULL OR x.fingerprint <> i.fingerprint)")
    changed += (_any("d.patient_id", scope.patient_ids, params) + _any("d.id", decision_ids, params)
                + _after("d.id", after, params))
    added = ("SELECT d.id, NULL::bigint, x.id FROM memory_decision d "
             "JOIN patients_dispensingrecord x ON x.patient_id = d.patient_id AND x.drug = d.subject "
             "WHERE " + standing + " AND d.subject <> ''")
    added += (_any("d.patient_id", scope.patient_ids, params) + _any("d.id", decision_ids, params)
              + _after("d.id", after, params))
    added += (" AND NOT EXISTS (SELECT 1 FROM memory_decisioninput i "
              "WHERE i.decision_id = d.id AND i.dispensing_id = x.id)")
    return f"{changed} UNION ALL {added}", params


_BRANCHES = {RETRACTED_READ: _retracted_read, NEW_FACT: _new_fact, DISPENSING_CHANGED: _dispensing_changed}


@dataclass(frozen=True)
class Scope:
    """What a sweep looks at: changed facts, changed patients, or (both None) everything.

    `retracted_fact_ids`: those of the changed facts already retracted when the scope was made (None:
    not looked up). Only their reads can be stale reads. A fact retracted later is its own change, with
    its own sweep; a retracted version is never believed again. Without it, every page scanned the
    reads of the changed facts that are still believed, that is the sweep's own new decisions: the
    planner's statistics predate those facts, so it read them all and filtered by decision
    (a new recall's pages)."""

    fact_ids: tuple[int, ...] | None = None
    patient_ids: tuple[int, ...] | None = None
    retracted_fact_ids: tuple[int, ...] | None = None

    @classmethod
    def of(cls, fact_ids=None, patient_ids=None) -> "Scope":
        facts = tuple(sorted({int(f) for f in fact_ids})) if fact_ids else None
        retracted = None
        if facts:
            retracted = tuple(Fact.objects.filter(id__in=facts, retracted_at__isnull=False)
                              .order_by("id").values_list("id", flat=True))
        return cls(facts, tuple(sorted({int(p) for p in patient_ids})) if patient_ids else None, retracted)

    @property
    def everything(self) -> bool:
        return self.fact_ids is None and self.patient_ids is None

    def branches(self) -> list[str]:
        if self.everything:
            return [RETRACTED_READ, NEW_FACT, DISPENSING_CHANGED]
        by_facts = []
        if self.fact_ids:
            by_facts = [NEW_FACT] if self.retracted_fact_ids == () else [RETRACTED_READ, NEW_FACT]
        return by_facts + ([DISPENSING_CHANGED] if self.patient_ids else [])


_STANDING = "d.status = 'standing'"


def _union(scope: Scope, decision_ids=None, *, standing_only: bool = True, after: int = 0,
           probe: bool = False) -> tuple[str, list]:
    """The stale set's branches as one UNION ALL. probe: the form that finds a first row soonest
    (any_stale), where a branch has one."""
    parts, params = [], []
    standing = _STANDING if standing_only else "TRUE"
    for name in scope.branches():
        if probe and name == NEW_FACT and scope.fact_ids and decision_ids is None:
            sql, branch_params = _new_fact_probe(scope, standing, after)
        else:
            sql, branch_params = _BRANCHES[name](scope, decision_ids, standing, after)
        parts.append(f"SELECT decision_id, fact_id, dispensing_id, '{name}' AS kind FROM ({sql}) AS {name}")
        params.extend(branch_params)
    return " UNION ALL ".join(parts), params


def stale_decision_ids(*, after: int = 0, limit: int = 1000, scope: Scope | None = None,
                       lock: bool = False, among=None) -> list[int]:
    """One keyset page of the stale set, ordered by decision id (locked SKIP LOCKED for a sweep page).

    `among`: only these decision ids (the next slice of `all_stale_ids`, read when the sweep began):
    the page then costs its own size, not the size of the stale set left. Each is checked again
    here, under the page's lock, so one re-decided meanwhile (or no longer stale) drops out."""
    scope = scope or Scope()
    if not scope.branches():
        return []
    if among is not None and not among:
        return []
    union, params = _union(scope, decision_ids=among, after=after)
    # OFFSET 0: the stale set is computed once, then joined. A one-branch union pulled up into a semi
    # join was planned as a walk over every standing decision from `after`, running the branch for
    # each until LIMIT was met (10 s for a new recall's last page).
    sql = (f"SELECT d.id FROM memory_decision d WHERE d.status = 'standing' AND d.id > %s "
           f"AND d.id IN (SELECT decision_id FROM ({union}) AS stale OFFSET 0) ORDER BY d.id LIMIT %s")
    if lock:
        sql += " FOR UPDATE OF d SKIP LOCKED"
    with connection.cursor() as cursor:
        cursor.execute(sql, [after, *params, limit])
        return [row[0] for row in cursor.fetchall()]


def lock_stale_among(among, scope: Scope | None = None, *, lock: bool = True
                     ) -> tuple[list[int], dict[int, list["StaleReason"]]]:
    """A sweep page from its slice of `all_stale_ids`: lock those still standing (SKIP LOCKED: what
    another sweep holds is its work), then say why each is stale, in one union restricted to them.
    Returns (the locked ids still stale, in id order; their reasons). One union per page instead of
    two (stale_decision_ids(among=...) + stale_reasons)."""
    among = sorted({int(i) for i in among})
    if not among:
        return [], {}
    sql = "SELECT id FROM memory_decision WHERE id = ANY(%s) AND status = 'standing' ORDER BY id"
    if lock:
        sql += " FOR UPDATE SKIP LOCKED"
    with connection.cursor() as cursor:
        cursor.execute(sql, [among])
        locked = [row[0] for row in cursor.fetchall()]
    reasons = stale_reasons(locked, scope)
    ids = [i for i in locked if reasons[i]]
    return ids, {i: reasons[i] for i in ids}


def all_stale_ids(scope: Scope | None = None) -> list[int]:
    """Every decision of the stale set now, by id: one pass over the set (a sweep reads it once and
    then locks it page by page with stale_decision_ids(among=...))."""
    scope = scope or Scope()
    if not scope.branches():
        return []
    union, params = _union(scope)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT decision_id FROM ({union}) AS stale ORDER BY decision_id", params)
        return [row[0] for row in cursor.fetchall()]


def any_stale(scope: Scope | None = None) -> bool:
    """Is anything in the stale set? Stops at the first stale row: the triggers' pre-check, where
    reading the first page of the set (stale_decision_ids(limit=1)) computed all of it first: 3.3 s for
    a new recall under 100,000 standing decisions (bench/recall_to_queue.py)."""
    scope = scope or Scope()
    if not scope.branches():
        return False
    union, params = _union(scope, probe=True)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS ({union})", params)
        return bool(cursor.fetchone()[0])


def count_stale(scope: Scope | None = None) -> int:
    scope = scope or Scope()
    if not scope.branches():
        return 0
    union, params = _union(scope)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(DISTINCT decision_id) FROM ({union}) AS stale", params)
        return cursor.fetchone()[0]


@dataclass(frozen=True)
class StaleReason:
    kind: str  # RETRACTED_READ | NEW_FACT | DISPENSING_CHANGED
    fact_id: int | None = None
    dispensing_id: int | None = None


def stale_reasons(decision_ids, scope: Scope | None = None, *, standing_only: bool = True
                  ) -> dict[int, list[StaleReason]]:
    """Why each of these decisions is stale (empty list: it still stands). Used by the sweep to
    pick what to tell the patient changed, and by the API's "is this answer still valid?" check
    (with standing_only=False, for a superseded decision: what changed under it)."""
    decision_ids = sorted({int(i) for i in decision_ids})
    reasons: dict[int, list[StaleReason]] = {i: [] for i in decision_ids}
    if not decision_ids:
        return reasons
    union, params = _union(scope or Scope(), decision_ids, standing_only=standing_only)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT decision_id, kind, fact_id, dispensing_id FROM ({union}) AS stale "
                       "ORDER BY decision_id, kind, fact_id, dispensing_id", params)
        for decision_id, kind, fact_id, dispensing_id in cursor.fetchall():
            reasons[decision_id].append(StaleReason(kind, fact_id, dispensing_id))
    return reasons
