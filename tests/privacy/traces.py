"""Where a patient's identity still shows in the database: every text, character, JSON and text-array column
of every table (read from information_schema, so a table no model names is walked too), the decoded data of
every session, and the values in the process's cache. Used after an erasure: any hit is a copy it forgot."""

from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.core.cache import caches
from django.db import connection

TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb")
TEXT_ARRAYS = ("_text", "_varchar")


def _like(trace: str) -> str:
    return "%" + trace.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def text_columns() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND (data_type = ANY(%s) OR udt_name = ANY(%s)) "
            "ORDER BY table_name, column_name", [list(TEXT_TYPES), list(TEXT_ARRAYS)])
        return cursor.fetchall()


def traces_in_tables(traces: list[str]) -> list[str]:
    """'table.column: value' for every stored value holding one of `traces` (any case)."""
    patterns = [_like(t) for t in traces]
    found = []
    with connection.cursor() as cursor:
        for table, column in text_columns():
            cursor.execute(f'SELECT "{column}"::text FROM "{table}" WHERE "{column}"::text ILIKE ANY(%s)', [patterns])
            found += [f"{table}.{column}: {value[:200]}" for (value,) in cursor.fetchall()]
    return found


def traces_in_sessions(traces: list[str]) -> list[str]:
    found = []
    for session in Session.objects.all():
        data = str(SessionStore().decode(session.session_data)).lower()
        found += [f"django_session {session.session_key}: {t}" for t in traces if t.lower() in data]
    return found


def traces_in_cache(traces: list[str]) -> list[str]:
    """The local-memory cache of this process (the test profile's); its values are pickles, read raw."""
    store = getattr(caches["default"], "_cache", {})
    blob = " ".join(repr(value) for value in store.values()).lower()
    return [f"cache: {t}" for t in traces if t.lower() in blob]


def everywhere(traces: list[str]) -> list[str]:
    return traces_in_tables(traces) + traces_in_sessions(traces) + traces_in_cache(traces)
