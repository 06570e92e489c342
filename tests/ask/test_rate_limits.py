"""ask.rate_limits, the one home of every limit and usage count: exact across real concurrent processes (as
gunicorn's workers share it) for the API's per-key limit, the reply links' limit and model calls, windows
aligned as documented, nothing counted past a cap, and a client address kept only as its pseudonym."""

import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection

from ask import rate_limits
from ask.keys import issue_key
from ask.models import ApiClient, UsageCounter
from replies import services as reply_services
from tests.procs import start_python

pytestmark = pytest.mark.django_db(transaction=True)

# One instant for every process, so a race never straddles the end of a window.
NOW = datetime(2026, 12, 5, 14, 30, 15, 500000, tzinfo=UTC)

RACER = """
import sys, time
from datetime import datetime
start, attempts, now = float(sys.argv[1]), int(sys.argv[2]), datetime.fromisoformat(sys.argv[3])
{setup}
time.sleep(max(0.0, start - time.time()))
granted = 0
for _ in range(attempts):
    granted += bool({attempt})
print(granted)
"""


def race(processes: int, attempts: int, *, setup: str, attempt: str, **env) -> list[int]:
    """Each process sets Django up, then all make `attempts` attempts at once; the grants of each."""
    start = time.time() + 5.0
    code = RACER.format(setup=setup, attempt=attempt)
    procs = [start_python(f"import sys; sys.argv = {['x', str(start), str(attempts), NOW.isoformat()]!r}\n" + code,
                          **env) for _ in range(processes)]
    granted = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        granted.append(int(out.strip().splitlines()[-1]))
    return granted


@pytest.mark.slow
def test_take_grants_exactly_the_cap_to_concurrent_processes_in_a_timedelta_window():
    granted = race(6, 20, setup="from datetime import timedelta\nfrom ask.rate_limits import take",
                   attempt='take("race:plain", timedelta(minutes=10), 47, now=now)')
    assert sum(granted) == 47 and all(n < 47 for n in granted)  # shared by the processes, not 47 each
    [row] = UsageCounter.objects.filter(scope="race:plain")
    assert row.n == 47 and row.window_start == datetime(2026, 12, 5, 14, 30, tzinfo=UTC)


@pytest.mark.slow
def test_the_api_limit_per_key_holds_across_processes():
    key, _secret = issue_key(ApiClient.objects.create(name="Race"))
    setup = (f"from ask.models import ApiKey\nfrom api.problems import Problem\nfrom api.services import take_request\n"
             f"key = ApiKey.objects.get(pk={key.pk})\n"
             "def attempt():\n    try:\n        take_request(key, now=now)\n        return True\n"
             "    except Problem:\n        return False\n")
    granted = race(5, 12, setup=setup, attempt="attempt()", UNSAY_API_RATE_PER_MINUTE=25)
    assert sum(granted) == 25
    assert UsageCounter.objects.get(scope=f"apikey:{key.pk}").n == 25


@pytest.mark.slow
def test_the_reply_link_limit_holds_across_processes_and_keeps_no_address():
    granted = race(5, 10, setup="from replies.services import over_limit",
                   attempt='not over_limit(None, "203.0.113.50", now=now)', UNSAY_REPLY_RATE=18)
    assert sum(granted) == 18
    [(scope, n)] = UsageCounter.objects.filter(scope__startswith="reply:").values_list("scope", "n")
    assert n == 18 and "203.0.113.50" not in scope and scope.startswith(reply_services.MISS_SCOPE)


@pytest.mark.slow
def test_model_calls_keep_their_daily_cap_across_processes():
    granted = race(4, 10, setup="from ask.services import reserve_model_call",
                   attempt="reserve_model_call(now=now)[0]", UNSAY_MODEL_DAILY_CAP=23,
                   UNSAY_MODEL_HOURLY_CAP_PER_CLIENT=1000)
    assert sum(granted) == 23
    assert rate_limits.counts("daily", "day", now=NOW) == {"daily": 23}


def test_windows_are_aligned_on_the_epoch_in_utc():
    assert rate_limits.window_start("minute", NOW) == datetime(2026, 12, 5, 14, 30, tzinfo=UTC)
    assert rate_limits.window_start("hour", NOW) == datetime(2026, 12, 5, 14, tzinfo=UTC)
    assert rate_limits.window_start("day", NOW) == datetime(2026, 12, 5, tzinfo=UTC)
    assert rate_limits.window_start(timedelta(minutes=15), NOW) == datetime(2026, 12, 5, 14, 30, tzinfo=UTC)
    elsewhere = NOW.astimezone(ZoneInfo("America/New_York"))
    assert rate_limits.window_start("day", elsewhere) == datetime(2026, 12, 5, tzinfo=UTC)
    assert rate_limits.seconds_left("minute", NOW) == 45  # 44.5 s, rounded up
    assert rate_limits.seconds_left("hour", datetime(2026, 12, 5, 14, 59, 59, 999999, tzinfo=UTC)) == 1
    with pytest.raises(ValueError):
        rate_limits.window_start(timedelta(0), NOW)
    with pytest.raises(KeyError):
        rate_limits.window_start("fortnight", NOW)


def test_past_the_cap_nothing_is_counted_and_a_new_window_starts_again():
    assert not connection.in_atomic_block  # the path a served request takes (its own short transaction)
    assert [rate_limits.take("t:a", "minute", 2, now=NOW) for _ in range(4)] == [True, True, False, False]
    assert rate_limits.counts("t:", "minute", now=NOW) == {"t:a": 2}
    assert rate_limits.take("t:a", "minute", 2, now=NOW + timedelta(minutes=1))
    assert not rate_limits.take("t:b", "minute", 0, now=NOW)
    assert rate_limits.counts("t:", "minute", now=NOW) == {"t:a": 2}


def test_count_is_never_refused_and_says_which_use_it_was():
    assert [rate_limits.count("c:x", "hour", now=NOW) for _ in range(3)] == [1, 2, 3]


def test_give_back_undoes_one_take_and_never_goes_below_zero():
    rate_limits.take("g:x", "day", 5, now=NOW)
    rate_limits.give_back("g:x", "day", now=NOW)
    rate_limits.give_back("g:x", "day", now=NOW)
    assert rate_limits.counts("g:", "day", now=NOW) == {"g:x": 0}


def test_prune_drops_only_windows_gone_by_of_its_prefix():
    rate_limits.take("p:old", "minute", 5, now=NOW - timedelta(minutes=10))
    rate_limits.take("p:new", "minute", 5, now=NOW)
    rate_limits.take("q:old", "minute", 5, now=NOW - timedelta(minutes=10))
    rate_limits.prune("p:", NOW - timedelta(minutes=5))
    assert set(UsageCounter.objects.values_list("scope", flat=True)) == {"p:new", "q:old"}


def test_a_pseudonym_hides_the_address_and_changes_with_the_day_and_the_kind():
    today = rate_limits.pseudonym("reply", "203.0.113.50", NOW.date())
    assert "203.0.113.50" not in today and len(today) == 32
    assert today == rate_limits.pseudonym("reply", "203.0.113.50", NOW.date())
    assert today != rate_limits.pseudonym("reply", "203.0.113.50", (NOW + timedelta(days=1)).date())
    assert today != rate_limits.pseudonym("check", "203.0.113.50", NOW.date())


def test_a_scope_too_long_for_its_column_is_refused():
    with pytest.raises(ValueError):
        rate_limits.take("x" * 101, "minute", 5)
