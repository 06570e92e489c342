"""What did we believe then? Two routes to the same question.

- bitemporal: our own belief intervals (asserted_at <= t < retracted_at). Works on every engine and
  for any instant, however old, because rows are never updated in place except to close an interval.
- mvcc: the engine's own history, `AS OF SYSTEM TIME t` (CockroachDB only). It answers only while t is
  newer than the replica GC threshold (gc.ttlseconds); older instants fail with the database's reason.

The command `manage.py replay` and the admin's replay page print both.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import DatabaseError, connection
from django.utils import timezone

from memory import decisions, retrieval
from memory.models import Decision

BITEMPORAL = "bitemporal"
MVCC = "mvcc"
GC_THRESHOLD_ERROR = "must be after replica GC threshold"


@dataclass
class RouteResult:
    route: str
    status: str  # "ok", "failed", "unavailable"
    rows: list[dict] = field(default_factory=list)
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def versions(self) -> set[tuple[str, int]]:
        return {(r["fact_key"], r["version"]) for r in self.rows}


def _row(fact_key, version, statement, asserted_at, retracted_at) -> dict:
    return {"fact_key": fact_key, "version": version, "statement": statement, "asserted_at": asserted_at,
            "retracted_at": retracted_at}


def bitemporal_route(at: datetime, *, fact_key: str | None = None, subject: str | None = None,
                     fact_keys=None) -> RouteResult:
    qs = retrieval.beliefs_at(at, fact_key=fact_key, subject=subject)
    if fact_keys is not None:
        qs = qs.filter(fact_key__in=list(fact_keys))
    rows = [_row(f.fact_key, f.version, f.statement, f.asserted_at, f.retracted_at) for f in qs]
    return RouteResult(BITEMPORAL, "ok", rows)


def mvcc_route(at: datetime, *, fact_key: str | None = None, subject: str | None = None,
               fact_keys=None) -> RouteResult:
    """The versions the table itself held as believed at `at`, read through CockroachDB time travel."""
    vendor = connection.vendor
    if vendor != "cockroachdb":
        return RouteResult(MVCC, "unavailable", reason=f"unavailable on this engine ({vendor}): "
                           "AS OF SYSTEM TIME is a CockroachDB feature; the bitemporal route answers instead.")
    if connection.in_atomic_block:
        return RouteResult(MVCC, "failed", reason="AS OF SYSTEM TIME cannot run inside an open transaction.")
    where, params = ["retracted_at IS NULL"], []
    if fact_key:
        where.append("fact_key = %s")
        params.append(fact_key)
    if subject:
        where.append("subject = %s")
        params.append(subject)
    if fact_keys is not None:
        where.append("fact_key = ANY(%s)")
        params.append(list(fact_keys))
    # AS OF SYSTEM TIME takes a constant, not a placeholder; the instant is formatted from a datetime only.
    instant = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00:00")
    sql = (f"SELECT fact_key, version, statement, asserted_at, retracted_at FROM memory_fact "
           f"AS OF SYSTEM TIME '{instant}' WHERE {' AND '.join(where)} ORDER BY fact_key, version")
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = [_row(*r) for r in cursor.fetchall()]
    except DatabaseError as exc:
        return RouteResult(MVCC, "failed", reason=str(exc).strip())
    return RouteResult(MVCC, "ok", rows)


def replay_at(at: datetime, *, fact_key: str | None = None, subject: str | None = None) -> dict:
    """Beliefs about a key (or subject) at instant `at`, by both routes."""
    if at > timezone.now():
        raise ValueError(f"{at.isoformat()} is in the future; replay answers for past instants only.")
    return {
        "at": at, "fact_key": fact_key, "subject": subject,
        "routes": [bitemporal_route(at, fact_key=fact_key, subject=subject),
                   mvcc_route(at, fact_key=fact_key, subject=subject)],
    }


def replay_decision_routes(decision_id: int) -> dict:
    """decisions.replay_decision (the read set as stored, content then, what is retracted now) plus both
    routes' view of the read keys at the decision's instant."""
    try:
        replay = decisions.replay_decision(decision_id)
    except Decision.DoesNotExist:
        raise ValueError(f"No decision with id {decision_id}.") from None
    decision = replay["decision"]
    keys = sorted({r["fact_key"] for r in replay["reads"]})
    replay["routes"] = [bitemporal_route(decision.decided_at, fact_keys=keys),
                        mvcc_route(decision.decided_at, fact_keys=keys)]
    return replay


def _route_lines(route: RouteResult) -> list[str]:
    if not route.ok:
        return [f"[{route.route}] {route.status}: {route.reason}"]
    lines = [f"[{route.route}] ok: {len(route.rows)} believed version(s)"]
    lines += [f"  {r['fact_key']} v{r['version']}: {r['statement']}" for r in route.rows]
    return lines


def format_replay_at(result: dict) -> str:
    target = f"key {result['fact_key']}" if result["fact_key"] else f"subject {result['subject']}"
    lines = [f"Beliefs about {target} at {result['at'].isoformat()}"]
    for route in result["routes"]:
        lines += _route_lines(route)
    return "\n".join(lines)


def format_replay_decision(result: dict) -> str:
    d = result["decision"]
    lines = [f"Decision {d.id} ({d.public_id}) at {d.decided_at.isoformat()}: {d.verdict} by {d.reasoner}",
             f"  question: {d.question}", f"  status: {d.status}; stale now: {'yes' if result['stale'] else 'no'}",
             "Read set as stored:"]
    for r in result["reads"]:
        now = (f"retracted {r['retracted_at'].isoformat()} ({r['retraction_reason'] or 'no reason'})"
               + (f", now v{r['believed_now_version']}" if r["believed_now_version"] else ", nothing believed now")
               if r["retracted_now"] else "still believed")
        lines.append(f"  #{r['rank']} {r['fact_key']} v{r['version']}{' [load-bearing]' if r['load_bearing'] else ''}"
                     f": {r['statement']} -- {now}")
    for route in result["routes"]:
        lines += _route_lines(route)
    return "\n".join(lines)
