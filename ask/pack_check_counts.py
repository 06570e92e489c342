"""What "check my pack" keeps: counts, never what was asked.

    take_check(address, outcome) -> bool   one more check from this client address this minute and one
                                           more answer of this outcome today; False past
                                           UNSAY_CHECK_RATE_PER_MINUTE (nothing counted then)
    outcome_counts() -> {outcome: n}     today's answers

Both are counted by ask.rate_limits (its conditional upsert, TAKE_SQL, on UsageCounter), so every gunicorn
worker shares one count. The address is never stored: a counter's scope holds its pseudonym
(rate_limits.pseudonym: an HMAC with the secret key and the day); the rows of past minutes are deleted as
new ones come. The NDC, the lot and the scanned text are never written anywhere.
"""

import secrets
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from ask import rate_limits
from core.retry import run_in_transaction

ADDRESS_SCOPE = "check:client:"
OUTCOME_SCOPE = "check:outcome:"
KEEP_ADDRESS_ROWS = timedelta(minutes=5)
PRUNE_ONE_IN = 100


_TABLE = rate_limits.TABLE
# The address limit (rate_limits.TAKE_SQL itself) and, only when it grants, the day's outcome count (the same
# upsert, never refused), in one statement (one round trip, one implicit transaction) whose commit does not
# wait for the disk: set_config(..., true) lasts until that transaction's commit, which reads it.
_TAKE_AND_COUNT_SQL = f"""
WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true) AS setting),
granted AS ({rate_limits.TAKE_SQL}),
counted AS (
    INSERT INTO {_TABLE} (scope, window_start, n) SELECT %(outcome)s, %(day)s, 1 FROM granted
    WHERE %(outcome)s <> ''
    ON CONFLICT (scope, window_start) DO UPDATE SET n = {_TABLE}.n + 1
    RETURNING n
)
SELECT count(*) FROM granted, relaxed
"""


def take_check(address: str, outcome: str = "", *, now=None) -> bool:
    """One more check from this address this minute and, when granted, one more answer of `outcome` today,
    atomically: False (and nothing counted) past the limit. The pack is read before (two light queries),
    so one round of counting serves both the limit and the count: on PostgreSQL one statement
    (bench/check_pack.py: a public page at 200 checks a second), on CockroachDB, which does not let one
    statement modify a table twice, one transaction of two upserts."""
    now = now or timezone.now()
    minute = rate_limits.window_start("minute", now)
    scope = ADDRESS_SCOPE + rate_limits.pseudonym("check", address or "unknown", now.date())
    cap = settings.UNSAY_CHECK_RATE_PER_MINUTE
    if cap <= 0:
        granted = False
    elif connection.vendor == "postgresql" and not connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute(_TAKE_AND_COUNT_SQL, {
                "scope": scope, "window_start": minute, "cap": min(cap, rate_limits.NO_CAP),
                "day": rate_limits.window_start("day", now),
                "outcome": OUTCOME_SCOPE + str(outcome) if outcome else ""})
            granted = cursor.fetchone()[0] > 0
    else:
        # CockroachDB, or inside a caller's transaction, which the two counts then join.
        def count() -> bool:
            if not rate_limits.take(scope, "minute", cap, now=now):
                return False
            if outcome:
                rate_limits.count(OUTCOME_SCOPE + str(outcome), "day", now=now)
            return True

        granted = count() if connection.in_atomic_block else run_in_transaction(count)
    if not granted or secrets.randbelow(PRUNE_ONE_IN) == 0:
        # Now and then (and whenever someone is refused): drop the rows of minutes gone by, so the table
        # holds a few minutes of pseudonyms at most and no request pays for the clean-up every time.
        rate_limits.prune(ADDRESS_SCOPE, minute - KEEP_ADDRESS_ROWS)
    return granted


def outcome_counts(*, now=None) -> dict[str, int]:
    """Today's answers by outcome (or the day of `now`)."""
    return {scope[len(OUTCOME_SCOPE):]: n for scope, n in rate_limits.counts(OUTCOME_SCOPE, "day", now=now).items()}
