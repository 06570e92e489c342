"""Check my pack's counts in the database, as gunicorn's processes share them: the per-address limit is
exact across real concurrent processes, the day's outcome count moves only with a granted check, and what
is stored is a pseudonym, never the address. Outside a test transaction (transaction=True), so the
one-statement path a served request takes is the one exercised."""

import time

import pytest
from django.db import connection

from ask.models import UsageCounter
from ask.pack_check_counts import ADDRESS_SCOPE, OUTCOME_SCOPE, outcome_counts, take_check
from tests.procs import start_python

pytestmark = pytest.mark.django_db(transaction=True)

CHECKER = """
import sys, time
from ask.pack_check_counts import take_check
start, attempts, address, outcome = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
time.sleep(max(0.0, start - time.time()))
print(sum(take_check(address, outcome) for _ in range(attempts)))
"""


def race(addresses, attempts, outcome, cap):
    start = time.time() + 4.0  # every process sets up Django first, then they race
    procs = []
    for address in addresses:
        argv = ["x", str(start), str(attempts), address, outcome]
        procs.append(start_python(f"import sys; sys.argv = {argv!r}\n" + CHECKER, UNSAY_CHECK_RATE_PER_MINUTE=cap))
    granted = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        granted.append(int(out.strip().splitlines()[-1]))
    return granted


def _minute_of_test_start():
    return time.time() % 60 < 50  # the race must not straddle a minute (the limit's window)


@pytest.mark.slow
def test_the_address_limit_is_exact_across_processes_and_only_granted_checks_are_counted():
    if not _minute_of_test_start():
        time.sleep(61 - time.time() % 60)
    granted = race(["203.0.113.7"] * 4 + ["198.51.100.9"] * 2, attempts=15, outcome="recalled", cap=20)
    # 60 attempts from the first address, 30 from the second: each gets exactly its 20 this minute.
    assert sum(granted[:4]) == 20 and sum(granted[4:]) == 20
    assert outcome_counts() == {"recalled": 40}
    rows = list(UsageCounter.objects.filter(scope__startswith=ADDRESS_SCOPE).values_list("scope", "n"))
    assert sorted(n for _scope, n in rows) == [20, 20]
    assert not any("203.0.113.7" in scope or "198.51.100.9" in scope for scope, _n in rows)


def test_a_refused_check_counts_nothing_and_an_unread_pack_counts_only_against_the_limit(settings):
    settings.UNSAY_CHECK_RATE_PER_MINUTE = 2
    assert not connection.in_atomic_block
    assert take_check("192.0.2.1", "") and take_check("192.0.2.1", "not_listed")
    assert not take_check("192.0.2.1", "recalled")
    assert outcome_counts() == {"not_listed": 1}
    assert not UsageCounter.objects.filter(scope=OUTCOME_SCOPE).exists()
    settings.UNSAY_CHECK_RATE_PER_MINUTE = 0
    assert not take_check("192.0.2.2", "recalled")
    assert outcome_counts() == {"not_listed": 1}
