"""The fact rows the write path reads and the PostgreSQL statements it sends: the believed versions of a set of
keys (believed_facts), fact rows built from raw SQL without the ORM or the vector (fact_from_row), and the
statements prepared once per database session (WRITE_STATEMENTS) that memory.fact_writes runs by EXECUTE
inside its multi-statement messages. Nothing here writes; memory.fact_writes is the one writer of facts."""

import weakref

from django.db import connection
from psycopg import pq

from memory.models import Fact

# Fact rows read and returned by raw SQL on the write path, without the vector: built with
# Fact.from_db (what the ORM would build, embedding deferred) so a write costs no ORM query.
_FACT_FIELDS = [f for f in Fact._meta.concrete_fields if f.attname != "embedding"]
FACT_NAMES = [f.attname for f in _FACT_FIELDS]
_FACT_CONVERTERS = [getattr(f, "from_db_value", None) for f in _FACT_FIELDS]


def fact_columns(alias: str) -> str:
    return ", ".join(f"{alias}.{f.column}" for f in _FACT_FIELDS)


def fact_from_row(values) -> Fact:
    values = [convert(v, None, connection) if convert and v is not None else v
              for convert, v in zip(_FACT_CONVERTERS, values, strict=True)]
    return Fact.from_db(connection.alias, FACT_NAMES, values)


def believed_facts(keys) -> list[Fact]:
    """The believed versions of these fact keys, without their vectors, in one query."""
    if not keys:
        return []
    if connection.vendor != "postgresql":
        return list(Fact.objects.believed().filter(fact_key__in=keys).defer("embedding"))
    with connection.cursor() as cursor:
        try:
            cursor.execute(missing_write_statements(cursor) + "EXECUTE unsay_fact_believed(%s::text[])",
                           [sorted(keys)])
        except BaseException:
            prepared_unknown()
            raise
        prepared_ok()
        return [fact_from_row(row) for row in rows_of(cursor)[-1]]


# The PostgreSQL write path's statements, prepared once per database connection and run by EXECUTE
# inside the same multi-statement messages. Parsing and planning them anew was ~40% of the server's
# CPU per assert (perf, pgbench of the same SQL). Their parameters are arrays and JSON sets, so a
# custom plan per call buys nothing: the write transaction runs them with generic plans (SET LOCAL
# plan_cache_mode; it touches only prepared statements, and Django's own queries are never prepared).
# Session-level prepared statements need a session per connection: no pooler in transaction mode.
WRITE_STATEMENTS = {
    "unsay_fact_believed": ("text[]", f"SELECT {fact_columns('f')} FROM memory_fact f"
                                      " WHERE f.retracted_at IS NULL AND f.fact_key = ANY($1)"),
    "unsay_fact_lock": ("text[]", "SELECT pg_advisory_xact_lock(hashtextextended('memory_fact:' || k, 0))"
                                  ' FROM (SELECT k FROM unnest($1) AS k ORDER BY k COLLATE "C" OFFSET 0) AS ordered'),
    "unsay_fact_locking_read": ("text[]", f"""
        SELECT k.fact_key AS key, nextval((SELECT pg_get_serial_sequence('memory_fact', 'id'))::regclass) AS new_id,
               CASE WHEN b.id IS NULL THEN
                   (SELECT MAX(retracted_at) FROM memory_fact f WHERE f.fact_key = k.fact_key) END AS floor,
               {fact_columns('b')}
        FROM unnest($1) AS k(fact_key)
        LEFT JOIN LATERAL (
            SELECT {fact_columns('memory_fact')} FROM memory_fact
            WHERE fact_key = k.fact_key AND retracted_at IS NULL FOR UPDATE
        ) AS b ON true"""),
    "unsay_fact_retire": ("jsonb", "UPDATE memory_fact AS m SET retracted_at = r.at, retracted_by = r.retired_by,"
                                   " retraction_reason = r.why, superseded_by_id = r.new_id"
                                   " FROM jsonb_to_recordset($1)"
                                   " AS r(id bigint, new_id bigint, at timestamptz, retired_by text, why text)"
                                   f" WHERE m.id = r.id RETURNING {fact_columns('m')}"),
    "unsay_fact_insert": ("jsonb", f"""
        INSERT INTO memory_fact (id, fact_key, version, kind, subject, lot, statement, attributes,
                                 content_hash, source, source_ref, valid_from, valid_to, asserted_at,
                                 asserted_by, retracted_by, retraction_reason, scopes)
        SELECT c.id, c.fact_key,
               COALESCE((SELECT MAX(f.version) FROM memory_fact f WHERE f.fact_key = c.fact_key), 0) + 1,
               c.kind, c.subject, c.lot, c.statement, c.attributes::jsonb, c.content_hash, c.source,
               c.source_ref, c.valid_from, c.valid_to, c.asserted_at, c.asserted_by, '', '',
               ARRAY(SELECT jsonb_array_elements_text(c.scopes))
        FROM jsonb_to_recordset($1) AS c(
            ord int, id bigint, fact_key text, kind text, subject text, lot text, statement text,
            attributes text, content_hash text, source text, source_ref text, valid_from timestamptz,
            valid_to timestamptz, asserted_at timestamptz, asserted_by text, scopes jsonb)
        ORDER BY c.ord
        RETURNING {fact_columns('memory_fact')}"""),
}
# The psycopg connections whose session is known to hold WRITE_STATEMENTS (a reconnect is a new object).
PREPARED_ON: "weakref.WeakSet" = weakref.WeakSet()


def missing_write_statements(cursor) -> str:
    """The PREPAREs this connection's session lacks, to send ahead of the first EXECUTE ("" once it is
    known to have them; then call prepared_ok). Asked of the server, not assumed: PREPARE is not
    transactional, so a message that failed half-way may have left some of them behind."""
    if connection.connection in PREPARED_ON:
        return ""
    cursor.execute("SELECT name FROM pg_prepared_statements WHERE name = ANY(%s)", [list(WRITE_STATEMENTS)])
    have = {row[0] for row in cursor.fetchall()}
    return "".join(f"PREPARE {name} ({types}) AS {sql};"
                   for name, (types, sql) in WRITE_STATEMENTS.items() if name not in have)


def prepared_ok():
    PREPARED_ON.add(connection.connection)


def prepared_unknown():
    """After a failed write the session's statements are asked for again (one query), whatever failed."""
    if connection.connection is not None:
        PREPARED_ON.discard(connection.connection)


def rows_of(cursor) -> list:
    """The row sets of a multi-statement execute, in order (statements that return none skipped)."""
    out = []
    while True:
        # Not cursor.description, which builds a Column per column on every access.
        if cursor.pgresult is not None and cursor.pgresult.status == pq.ExecStatus.TUPLES_OK:
            out.append(cursor.fetchall())
        if not cursor.nextset():
            return out
