"""`manage.py sweep` shows progress in units of work that committed, with a rate and the time left, and
reads 100% only once the last page has committed (a real process on the real database, its stderr read
as an operator's terminal would show it)."""

import re
import signal

import pytest

from tests.corrections.test_sweep_crash import AFFECTED, escalated  # noqa: F401 (the fixture: 10 stale decisions)
from tests.procs import manage

pytestmark = [pytest.mark.usefixtures("dispatch_not_enqueued"), pytest.mark.django_db(transaction=True),
              pytest.mark.slow]

NO_TRIGGERS = {"UNSAY_SWEEP_ON_SUPERSESSION": "0"}
STATE = re.compile(r"(\d+)%\|[^|]*\| (\d+)/(\d+) \[([^\]]*)\]")


def bar_states(stderr: str, desc: str) -> list[tuple[int, int, int, str]]:
    """(percent, done, total, [elapsed<left, rate]) of every state a bar was drawn in, in order."""
    states = []
    for segment in re.split(r"[\r\n]", stderr):
        if desc in segment and (found := STATE.search(segment)):
            percent, done, total, timing = found.groups()
            states.append((int(percent), int(done), int(total), timing))
    return states


def test_the_bar_counts_committed_decisions_and_reaches_100_percent_with_the_last_page(escalated):  # noqa: F811
    done = manage("sweep", "--page-size", "3", "--no-notices", UNSAY_SWEEP_PAGE_DELAY="0.3", **NO_TRIGGERS)
    assert done.returncode == 0, done.stderr[-3000:]

    states = bar_states(done.stderr, "sweep: re-decided")
    counts = [n for _p, n, _t, _timing in states]
    assert counts == sorted(counts) and set(counts) <= {0, 3, 6, 9, AFFECTED}, states  # whole pages, never ahead
    assert {3, 6, 9} & set(counts), states  # drawn as pages committed, not only at the end
    assert states[-1][:3] == (100, AFFECTED, AFFECTED)
    assert all(p < 100 for p, n, _t, _timing in states if n < AFFECTED)
    timing = states[-1][3]
    assert "<" in timing and re.search(r"(decision/s|s/decision)", timing), timing  # time left and rate


def test_the_bar_never_reads_100_percent_when_the_last_page_did_not_commit(escalated):  # noqa: F811
    # Pages of 3 of the 10 stale decisions: the fourth is the last; killed just before it commits.
    killed = manage("sweep", "--page-size", "3", UNSAY_SWEEP_CRASH_AT="before_commit:4", UNSAY_SWEEP_PAGE_DELAY="0.3",
                    **NO_TRIGGERS)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]

    states = bar_states(killed.stderr, "sweep: re-decided")
    assert states and max(n for _p, n, _t, _timing in states) == 9, states
    assert all(p < 100 for p, *_rest in states), states


def test_notices_have_their_own_bar_after_the_decisions(escalated):  # noqa: F811
    done = manage("sweep", "--page-size", "3", **NO_TRIGGERS)
    assert done.returncode == 0, done.stderr[-3000:]

    decisions = bar_states(done.stderr, "sweep: re-decided")
    notices = bar_states(done.stderr, "recall facts checked for notices")
    assert decisions[-1][:3] == (100, AFFECTED, AFFECTED)
    assert notices and notices[-1][0] == 100 and notices[-1][1] == notices[-1][2] >= 1, notices
    assert done.stderr.index("recall facts checked") > done.stderr.rindex(f"{AFFECTED}/{AFFECTED}")
