"""A live run holds a PostgreSQL advisory lock keyed by its id: when its process dies, the lock goes
with its connection, so anyone can tell a dead run from a live one at once (no heartbeat timeout).

    lock = RunLock("sweep_run", run.pk)   # take it before the run's row is committed (see below)
    lock.acquire()
    ...
    lock.release()

    run_is_dead("sweep_run", run_id)      # True / False, or None: no advisory locks on this engine

A run's row (recalls.IngestRun, corrections.SweepRun) speaks RunStatus, and ends through `end_run`.

The lock is session-level and lives on a connection of its own, opened for the run and closed with
it: Django's own connection is closed and reopened between requests and tasks (CONN_MAX_AGE,
close_old_connections) and a session lock on it would go with it, or outlive the run on a pooled one.
The dedicated connection is not registered in django.db.connections, so nothing else closes it.

Take the lock before the run's row becomes visible (inside the transaction that creates it): a probe
that sees a 'running' row can then never find its lock free while the run is alive.

CockroachDB has no advisory locks (pg_try_advisory_lock is unimplemented there): `supported()` is
False, RunLock does nothing, `run_is_dead` answers None and callers keep their heartbeat timeout.
A transaction-pooling PgBouncer in front of PostgreSQL would also break session locks: point
UNSAY_RUN_LOCKS=0 at such a deployment to fall back to heartbeats.
"""

import logging

from django.conf import settings
from django.db import connection, connections, models
from django.utils import timezone

log = logging.getLogger(__name__)


def _key_sql() -> str:
    # One bigint per (kind, id); hashtextextended is stable across servers and versions.
    return "hashtextextended(%s, 0)"


def _key(kind: str, run_id: int) -> str:
    return f"unsay.{kind}:{int(run_id)}"


def supported(conn=None) -> bool:
    """Advisory locks on this database (PostgreSQL, and not switched off)?"""
    conn = conn or connection
    return conn.vendor == "postgresql" and getattr(settings, "UNSAY_RUN_LOCKS", True)


class RunLock:
    """The session-level advisory lock a live run holds on a dedicated connection."""

    def __init__(self, kind: str, run_id: int):
        self.kind, self.run_id = kind, run_id
        self._conn = None

    @property
    def held(self) -> bool:
        return self._conn is not None

    def acquire(self) -> bool:
        """Take the lock; False if this engine has none (or someone holds it: never for a new run)."""
        if not supported():
            return False
        conn = connections.create_connection("default")
        try:
            conn.ensure_connection()
            with conn.cursor() as cursor:
                cursor.execute(f"SELECT pg_try_advisory_lock({_key_sql()})", [_key(self.kind, self.run_id)])
                got = cursor.fetchone()[0]
        except Exception:
            conn.close()
            raise
        if not got:
            conn.close()
            log.warning("run lock %s %s is already held", self.kind, self.run_id)
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        """Give the lock back (closing its connection would too; both are done)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            with conn.cursor() as cursor:
                cursor.execute(f"SELECT pg_advisory_unlock({_key_sql()})", [_key(self.kind, self.run_id)])
        except Exception:  # noqa: BLE001 - the connection is closed below, which frees the lock anyway
            log.warning("could not release run lock %s %s; closing its connection", self.kind, self.run_id)
        finally:
            conn.close()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


def run_is_dead(kind: str, run_id: int) -> bool | None:
    """Is the run's lock free (its process is gone)? None when this engine has no advisory locks.

    Probes by taking the lock for an instant on this process's connection and giving it straight back."""
    if not supported():
        return None
    key = _key(kind, run_id)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_try_advisory_lock({_key_sql()})", [key])
        free = cursor.fetchone()[0]
        if free:
            cursor.execute(f"SELECT pg_advisory_unlock({_key_sql()})", [key])
    return bool(free)


def dead_among(kind: str, run_ids) -> list[int] | None:
    """The ids among `run_ids` whose lock is free; None when this engine has no advisory locks."""
    if not supported():
        return None
    return [run_id for run_id in run_ids if run_is_dead(kind, run_id)]


def dead_runs(kind: str, running, no_heartbeat):
    """(the runs among the `running` queryset whose process is gone, found by their lock). By their free
    lock; on an engine without advisory locks, by `no_heartbeat` (a Q: the heartbeat timed out)."""
    dead_ids = dead_among(kind, list(running.values_list("id", flat=True)))
    if dead_ids is None:
        return running.filter(no_heartbeat), False
    return running.filter(pk__in=dead_ids), True


def lock_for_transaction(kind: str, key: str) -> bool:
    """Wait for, and hold until this transaction ends, the advisory lock of (kind, key): serialises
    one short critical section across processes and machines (a sweep planning its stale set's ranges).
    False, and nothing held, on an engine without advisory locks: callers must be correct without it."""
    if not supported():
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_advisory_xact_lock({_key_sql()})", [f"unsay.{kind}:{key}"])
    return True


class RunStatus(models.TextChoices):
    """The status of an ingestion or sweep run: one vocabulary for both."""

    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


def end_run(runs, status: str, **values) -> int:
    """A run's last write, for ingestion and sweep alike: the runs of this queryset that are still
    running become `status` (succeeded or failed), finished now, with `values` (error text, counters).
    Guarded by status = 'running': a run another process has already ended keeps its ending, and the
    count says how many ended here."""
    if status not in (RunStatus.SUCCEEDED, RunStatus.FAILED):
        raise ValueError(f"a run ends succeeded or failed, not {status!r}")
    return runs.filter(status=RunStatus.RUNNING).update(status=status, finished=timezone.now(), **values)
