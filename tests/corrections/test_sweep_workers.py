"""Sweeps on several workers share one stale set through claimed key ranges (corrections.sweep.claims).

Real processes (tests/procs.py) against the real test database, as Celery workers on one machine or
many would run them: no coordination but the database. Two sweeps of the same change re-decide every
stale decision exactly once between them; a sweep SIGKILLed in the middle of a range leaves it to the
survivor (or to a restart), and nothing is lost or doubled. Afterwards every standing verdict is what a
fresh decision on current beliefs and dispensing says.
"""

import re
import signal
import time
from collections import Counter

import pytest

from ask.services import ask
from corrections.models import Correction, OutboxMessage, Redecision, SweepRange, SweepRun
from corrections.sweep.run import count_stale
from tests.corrections.test_sweep_invariant import _check_invariant
from tests.factories import LOT, escalate, make_patient
from tests.procs import manage, start_python

pytestmark = [pytest.mark.usefixtures("dispatch_not_enqueued"), pytest.mark.django_db(transaction=True),
              pytest.mark.slow]

AFFECTED, OTHER_LOT, NEVER_ASKED = 24, 3, 2
PAGE_SIZE, RANGE_PAGES = 2, 2  # 6 ranges of 4 decisions
QUESTIONS = ["Is my valsartan safe?", "Should I keep taking my blood pressure pills?"]
WORKER = ("from corrections.sweep.run import sweep\n"
          f"r = sweep(page_size={PAGE_SIZE})\n"
          "print('RUN', r.run.pk, 'EXAMINED', r.examined, 'HANDLED', r.already_handled)\n")
# Each committed page waits a little, so the two workers' ranges interleave on a loaded machine.
ENV = {"UNSAY_SWEEP_ON_SUPERSESSION": "0", "UNSAY_SWEEP_RANGE_PAGES": RANGE_PAGES, "UNSAY_SWEEP_PAGE_DELAY": "0.5"}


@pytest.fixture
def stale_set(hashing_embeddings, no_auto_sweep):
    from memory.fact_writes import assert_claim
    from tests.factories import recall_claim

    assert_claim(recall_claim("D-0315-2019", LOT))
    for i in range(AFFECTED):
        ask(make_patient(f"SYN-W{i:02d}", [("Valsartan Tablets USP 40 mg", LOT)]), QUESTIONS[i % 2])
    for i in range(OTHER_LOT):
        ask(make_patient(f"SYN-X{i:02d}", [("Valsartan Tablets USP 40 mg", "3095511")]), QUESTIONS[0])
    for i in range(NEVER_ASKED):
        make_patient(f"SYN-Y{i:02d}", [("Valsartan Tablets USP 40 mg", LOT)])
    escalate()
    from corrections.sweep.staleness import all_stale_ids

    stale = all_stale_ids()
    assert len(stale) == AFFECTED
    return stale


def _wait_for_a_committed_page(timeout=120):
    """Until some sweep has committed a page: the next worker then meets a plan in progress."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if SweepRun.objects.filter(pages__gt=0).exists():
            return
        time.sleep(0.05)
    raise AssertionError("no sweep committed a page")


def _assert_each_redecided_once(stale):
    assert count_stale() == 0
    redecided = Counter(Redecision.objects.values_list("old_decision_id", flat=True))
    assert sorted(redecided) == sorted(stale)  # none missing, none that was not stale
    assert set(redecided.values()) == {1}  # none twice
    keys = Counter(Correction.objects.values_list("dedupe_key", flat=True))
    assert set(keys.values()) == {1}
    assert Counter(OutboxMessage.objects.values_list("dedupe_key", flat=True)) == keys
    assert Correction.objects.filter(kind="correction").count() == AFFECTED  # caution -> stop
    assert Correction.objects.filter(kind="notice").count() == NEVER_ASKED
    assert not SweepRange.objects.filter(done_at__isnull=True).exists()
    _check_invariant()


def test_two_workers_share_the_stale_set_and_re_decide_each_decision_once(stale_set):
    first = start_python(WORKER, **ENV)
    _wait_for_a_committed_page()
    second = start_python(WORKER, **ENV)
    outputs = [p.communicate(timeout=300) for p in (first, second)]
    for proc, (_out, err) in zip((first, second), outputs, strict=True):
        assert proc.returncode == 0, err[-3000:]

    _assert_each_redecided_once(stale_set)
    examined = [int(re.search(r"EXAMINED (\d+)", out).group(1)) for out, _ in outputs]
    assert sum(examined) == AFFECTED
    assert all(n > 0 for n in examined), examined  # the second joined the plan and took ranges of it
    planner = int(re.search(r"RUN (\d+)", outputs[0][0]).group(1))
    assert set(SweepRange.objects.values_list("run_id", flat=True)) == {planner}  # one plan, cut once
    assert SweepRange.objects.count() == AFFECTED // (PAGE_SIZE * RANGE_PAGES)
    holders = set(SweepRange.objects.values_list("claimed_by_id", flat=True))
    assert len(holders) == 2


def test_a_worker_killed_mid_range_loses_nothing_and_doubles_nothing(stale_set):
    # Killed in its fourth page, the second of its second range: that range is half done, the page rolls back.
    doomed = start_python(WORKER, UNSAY_SWEEP_CRASH_AT="mid_page:4", **ENV)
    _wait_for_a_committed_page()
    survivor = start_python(WORKER, **ENV)
    _out, err = doomed.communicate(timeout=300)
    assert doomed.returncode == -signal.SIGKILL, err[-3000:]
    out, err = survivor.communicate(timeout=300)
    assert survivor.returncode == 0, err[-3000:]

    if count_stale() or SweepRange.objects.filter(done_at__isnull=True).exists():
        # The survivor ran out of ranges before the kill: a restart (the reaper's resumption) finishes.
        restarted = manage("sweep", "--page-size", str(PAGE_SIZE), **ENV)
        assert restarted.returncode == 0, restarted.stderr[-3000:]

    _assert_each_redecided_once(stale_set)
    # The killed worker's range was taken over: claimed twice, finished once.
    assert SweepRange.objects.filter(claims__gt=1).count() >= 1
    dead = SweepRun.objects.get(status=SweepRun.Status.FAILED)
    assert "abandoned" in dead.error_text
    assert Redecision.objects.filter(sweep_run=dead).count() == 6  # its three committed pages stay


def test_a_range_held_by_a_live_worker_is_not_taken(stale_set):
    from datetime import timedelta

    from django.utils import timezone

    from corrections.sweep import claims
    from corrections.sweep.staleness import Scope

    holder = SweepRun.objects.create(trigger=SweepRun.Trigger.MANUAL, heartbeat=timezone.now())
    other = SweepRun.objects.create(trigger=SweepRun.Trigger.MANUAL, heartbeat=timezone.now())
    plan = claims.plan_ranges(holder, Scope.of(), PAGE_SIZE)
    from django.conf import settings

    per_range = PAGE_SIZE * settings.UNSAY_SWEEP_RANGE_PAGES
    assert plan.ranges == -(-AFFECTED // per_range) and plan.decisions == AFFECTED
    taken = [claims.claim(holder, plan.run_id) for _ in range(plan.ranges)]
    assert None not in taken and claims.claim(other, plan.run_id) is None  # all held by a live run
    assert claims.held_by_others(other, plan.run_id)

    SweepRange.objects.filter(pk=taken[0].pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert claims.claim(other, plan.run_id).pk == taken[0].pk  # lease ran out: taken over
    assert not claims.renew(taken[0], holder)  # the old holder learns it at its next page
    SweepRun.objects.filter(pk=holder.pk).update(status=SweepRun.Status.FAILED)
    assert claims.claim(other, plan.run_id).pk == taken[1].pk  # its run ended: its ranges are free
