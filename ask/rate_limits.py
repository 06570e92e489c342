"""Rate limits and usage counts that hold across every process: one conditional upsert on UsageCounter.

    take(scope, window, cap) -> bool        one more use of `scope` in the current window; False, and nothing
                                            counted, once the window's count has reached `cap`
    count(scope, window) -> int             one more use, never refused: the window's count after it
    give_back(scope, window)                undo one take (the call it allowed was not made)
    counts(prefix, window) -> {scope: n}    the current window's counts of the scopes starting with `prefix`
    window_start(window), seconds_left(window)
    pseudonym(kind, address, day) -> str    a client address as a counter's scope may hold it
    prune(prefix, before)                   drop the rows of windows that ended before `before`

Every limit of the service counts here: model calls per day and per client hour (ask.services), API requests
per key and minute (api.services), check my pack per address and minute (ask.pack_check_counts, which runs
TAKE_SQL inside its own one-statement form), reply links per link or address and hour (replies.services) and
refused erased keys (privacy.keys). gunicorn runs several worker processes, each with its own memory: a limit
counted in a process (or in Django's default cache) lets every worker grant it again. The row is counted in the
database with INSERT ... ON CONFLICT DO UPDATE ... WHERE n < cap, which PostgreSQL and CockroachDB both run
atomically per row, so concurrent requests in any number of processes are granted exactly `cap`.

A window is a timedelta or a named window ("minute", "hour", "day"), aligned on the Unix epoch in UTC: an hour
starts on the hour, a day at midnight UTC. `now` (every function takes it) is for tests and for callers that
must use one instant for several counts.
"""

import hashlib
import hmac
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone

from ask.models import UsageCounter
from core.retry import run_in_transaction

WINDOWS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
NO_CAP = 2**31 - 1  # UsageCounter.n is a 32-bit integer
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SCOPE_CHARS = UsageCounter._meta.get_field("scope").max_length

TABLE = UsageCounter._meta.db_table
# The one counting statement. It returns the new count when it counted, no row when the count had reached the
# cap. Parameters: scope, window_start, cap.
TAKE_SQL = (f"INSERT INTO {TABLE} (scope, window_start, n) VALUES (%(scope)s, %(window_start)s, 1) "
            f"ON CONFLICT (scope, window_start) DO UPDATE SET n = {TABLE}.n + 1 WHERE {TABLE}.n < %(cap)s "
            "RETURNING n")


def window_length(window: str | timedelta) -> timedelta:
    length = WINDOWS[window] if isinstance(window, str) else window
    if length <= timedelta(0) or length % timedelta(seconds=1):
        raise ValueError(f"A window is a whole number of seconds, not {length!r}.")
    return length


def window_start(window: str | timedelta, now: datetime | None = None) -> datetime:
    """The start of the window that holds `now` (UTC)."""
    now = (now or timezone.now()).astimezone(UTC)
    return now - (now - _EPOCH) % window_length(window)


def seconds_left(window: str | timedelta, now: datetime | None = None) -> int:
    """Whole seconds until the window that holds `now` ends (at least 1): what Retry-After says."""
    now = now or timezone.now()
    end = window_start(window, now) + window_length(window)
    return max(1, int((end - now).total_seconds() + 0.999))


def _counted(scope: str, window, cap: int, now) -> int | None:
    if len(scope) > _SCOPE_CHARS:
        raise ValueError(f"A counter's scope is at most {_SCOPE_CHARS} characters.")
    params = {"scope": scope, "window_start": window_start(window, now), "cap": cap}

    def upsert():
        with connection.cursor() as cursor:
            cursor.execute(TAKE_SQL, params)
            row = cursor.fetchone()
            return row[0] if row else None

    return upsert() if connection.in_atomic_block else run_in_transaction(upsert)


def take(scope: str, window: str | timedelta, cap: int, *, now: datetime | None = None) -> bool:
    """Count one use of `scope` in the window unless its count has reached `cap` (then False, nothing counted)."""
    if cap <= 0:
        return False
    return _counted(scope, window, min(cap, NO_CAP), now) is not None


def count(scope: str, window: str | timedelta, *, now: datetime | None = None) -> int:
    """Count one use of `scope` in the window, never refused; the window's count after it (1 = the first)."""
    return _counted(scope, window, NO_CAP, now)


def give_back(scope: str, window: str | timedelta, *, now: datetime | None = None) -> None:
    UsageCounter.objects.filter(scope=scope, window_start=window_start(window, now), n__gt=0).update(n=F("n") - 1)


def counts(prefix: str, window: str | timedelta, *, now: datetime | None = None) -> dict[str, int]:
    rows = UsageCounter.objects.filter(scope__startswith=prefix, window_start=window_start(window, now))
    return dict(rows.values_list("scope", "n"))


def pseudonym(kind: str, address: str, day) -> str:
    """A client address as a counter may hold it: an HMAC with the secret key and the day, which cannot be
    turned back into the address nor linked from one day to the next."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"{kind}:{day:%Y-%m-%d}:{address}".encode(), hashlib.sha256)
    return digest.hexdigest()[:32]


def prune(prefix: str, before: datetime) -> None:
    """Drop the rows of `prefix` scopes whose window started before `before` (the counts of windows gone by)."""
    UsageCounter.objects.filter(scope__startswith=prefix, window_start__lt=before).delete()
