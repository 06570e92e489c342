"""Retry whole transactions on serialization failures (SQLSTATE 40001).

CockroachDB runs SERIALIZABLE and asks clients to retry the *whole* transaction; PostgreSQL
raises the same SQLSTATE under SERIALIZABLE. django-cockroachdb ships no helper for this.
`run_in_transaction(fn)` must wrap the outermost transaction: retrying inside an outer atomic
block would replay only part of the work.
"""

import functools
import logging
import random
import time

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connections, transaction

log = logging.getLogger(__name__)

SERIALIZATION_FAILURE = "40001"
DEADLOCK_DETECTED = "40P01"  # PostgreSQL aborts one side of a deadlock; the whole transaction is safe to retry
UNIQUE_VIOLATION = "23505"


class RetriesExhausted(DatabaseError):
    """Raised when a transaction still conflicts after the configured number of attempts."""


def _sqlstate(exc: BaseException) -> str | None:
    seen = exc
    while seen is not None:
        state = getattr(seen, "sqlstate", None) or getattr(seen, "pgcode", None)
        if state:
            return state
        seen = seen.__cause__
    return None


def is_retryable(exc: BaseException, *, retry_unique_violations: bool = False) -> bool:
    state = _sqlstate(exc)
    if state in (SERIALIZATION_FAILURE, DEADLOCK_DETECTED):
        return True
    return retry_unique_violations and state == UNIQUE_VIOLATION and isinstance(exc, IntegrityError)


def run_in_transaction(fn, *args, using="default", attempts=None, retry_unique_violations=False,
                       base_delay=0.01, max_delay=1.0, **kwargs):
    """Run fn(*args, **kwargs) inside transaction.atomic, retrying the whole transaction.

    retry_unique_violations: treat a unique-index race (two writers computed the same next version)
    as a conflict to retry, which is right when fn recomputes its values from the database.
    """
    if connections[using].in_atomic_block:
        raise RuntimeError("run_in_transaction must wrap the outermost transaction, not run inside one.")

    def attempt():
        with transaction.atomic(using=using):
            return fn(*args, **kwargs)

    return retry_conflicts(attempt, attempts=attempts, retry_unique_violations=retry_unique_violations,
                           base_delay=base_delay, max_delay=max_delay)


def retry_conflicts(attempt, *, attempts=None, retry_unique_violations=False, base_delay=0.01, max_delay=1.0):
    """Call attempt() until it does not raise a retryable conflict: jittered exponential backoff, one
    log line per retry, RetriesExhausted at the end. attempt() must be a whole transaction that leaves
    nothing behind when it fails (run_in_transaction's atomic block, or a write that sends its own
    BEGIN and rolls back, memory.fact_writes._write_alone)."""
    attempts = attempts or settings.UNSAY_RETRY_ATTEMPTS
    last_error = None
    for number in range(1, attempts + 1):
        try:
            return attempt()
        except DatabaseError as exc:
            if not is_retryable(exc, retry_unique_violations=retry_unique_violations):
                raise
            last_error = exc
            if number == attempts:
                break
            delay = min(max_delay, base_delay * (2 ** (number - 1)))
            delay = delay / 2 + random.uniform(0, delay / 2)  # jitter so racing writers spread out
            log.info("transaction conflict (%s), attempt %d/%d, retrying in %.3fs",
                     _sqlstate(exc), number, attempts, delay)
            time.sleep(delay)
    raise RetriesExhausted(
        f"transaction still conflicting after {attempts} attempts (SQLSTATE {_sqlstate(last_error)}): {last_error}"
    ) from last_error


def retrying(_fn=None, **options):
    """Decorator form of run_in_transaction."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return run_in_transaction(fn, *args, **options, **kwargs)
        return wrapper
    return decorate(_fn) if _fn is not None else decorate
