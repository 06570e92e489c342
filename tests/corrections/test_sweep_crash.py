"""Crash-replay and concurrency with real processes (tests/procs.py) on the real database.

A sweep killed with SIGKILL at several points (UNSAY_SWEEP_CRASH_AT) and restarted, or two sweeps
started at once, must leave exactly one correction and one outbox message per dedupe key and no
affected decision unhandled. Two dispatchers must never send the same message twice.
"""

import re
import signal
from collections import Counter
from pathlib import Path

import pytest

from ask.services import ask
from corrections.models import Correction, OutboxMessage, Redecision, SweepRun
from corrections.review import approve
from corrections.sweep.run import count_stale
from memory.models import Decision
from tests.factories import LOT, escalate, make_patient
from tests.procs import manage, start_python

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [pytest.mark.usefixtures("dispatch_not_enqueued"), pytest.mark.django_db(transaction=True),
              pytest.mark.slow]

ON_LOT, OTHER_LOT, NEVER_ASKED = 10, 4, 3
# Decisions on other lots rest on no fact of the escalated lot: they are not re-decided.
AFFECTED = ON_LOT
QUESTIONS = ["Is my valsartan safe?", "Should I keep taking my blood pressure pills?"]


@pytest.fixture
def escalated(hashing_embeddings, no_auto_sweep):
    from memory.fact_writes import assert_claim
    from tests.factories import recall_claim

    assert_claim(recall_claim("D-0315-2019", LOT))
    for i in range(ON_LOT):
        ask(make_patient(f"SYN-L{i:02d}", [("Valsartan Tablets USP 40 mg", LOT)]), QUESTIONS[i % 2])
    for i in range(OTHER_LOT):
        ask(make_patient(f"SYN-O{i:02d}", [("Valsartan Tablets USP 40 mg", "3095511")]), QUESTIONS[0])
    for i in range(NEVER_ASKED):
        make_patient(f"SYN-N{i:02d}", [("Valsartan Tablets USP 40 mg", LOT)])
    escalate()
    assert count_stale() == AFFECTED
    return set(Decision.objects.values_list("id", flat=True))


def assert_exactly_once_and_complete(original_ids):
    assert count_stale() == 0
    originals = Decision.objects.filter(id__in=original_ids)
    assert originals.filter(status=Decision.Status.SUPERSEDED).count() == AFFECTED
    # the other-lot answers rest on nothing that changed: still standing, untouched
    assert originals.filter(status=Decision.Status.STANDING).count() == OTHER_LOT
    assert Redecision.objects.filter(old_decision_id__in=original_ids).count() == AFFECTED
    keys = Counter(Correction.objects.values_list("dedupe_key", flat=True))
    assert all(n == 1 for n in keys.values())
    assert OutboxMessage.objects.count() == Correction.objects.count()
    assert Correction.objects.filter(kind="correction").count() == ON_LOT  # caution -> stop
    assert Correction.objects.filter(kind="notice").count() == NEVER_ASKED
    assert set(OutboxMessage.objects.values_list("dedupe_key", flat=True)) == set(keys)


@pytest.mark.parametrize("crash_at", ["mid_page:2", "before_commit:2", "after_commit:1", "mid_notices:2"])
def test_a_killed_sweep_restarted_handles_everything_exactly_once(escalated, crash_at):
    crashed = manage("sweep", "--page-size", "3", UNSAY_SWEEP_CRASH_AT=crash_at, UNSAY_SWEEP_ON_SUPERSESSION="0")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert SweepRun.objects.get().status == SweepRun.Status.RUNNING  # killed: never finished

    resumed = manage("sweep", "--page-size", "3", UNSAY_SWEEP_ON_SUPERSESSION="0")

    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "decisions examined:" in resumed.stdout and "reasoner calls:" in resumed.stdout
    assert_exactly_once_and_complete(escalated)
    runs = list(SweepRun.objects.order_by("started"))
    assert runs[0].examined + runs[1].examined == AFFECTED  # committed pages are not redone


def test_two_sweeps_at_once_split_the_work_without_duplicates(escalated):
    code = ("from corrections.sweep.run import sweep\n"
            "r = sweep(page_size=2)\n"
            "print('EXAMINED', r.examined, 'HANDLED', r.already_handled)\n")
    procs = [start_python(code, UNSAY_SWEEP_ON_SUPERSESSION="0") for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]

    assert_exactly_once_and_complete(escalated)
    examined = sum(int(re.search(r"EXAMINED (\d+)", out).group(1)) for out, _ in outputs)
    assert examined == AFFECTED  # SKIP LOCKED: each decision re-decided by exactly one sweep


def test_two_dispatchers_never_send_the_same_message(escalated, people, tmp_path):
    manage("sweep", UNSAY_SWEEP_ON_SUPERSESSION="0")
    for correction_id in Correction.objects.values_list("id", flat=True):
        approve(correction_id, user=people["pharmacist"])
    # SMS patients would fail (SNS disabled); send everything by email for this test.
    OutboxMessage.objects.update(channel="email", recipient="patient@example.com")
    total = OutboxMessage.objects.count()
    code = ("from outbox.dispatch import dispatch_ready\n"
            "r = dispatch_ready(batch=2)\n"
            "print('SENT', r.sent)\n")
    env = {"UNSAY_VAR_DIR": str(tmp_path), "UNSAY_EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend"}
    procs = [start_python(code, **env) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]

    sent_ids = Counter()
    for path in Path(tmp_path, "mail").glob("*.log"):
        sent_ids.update(re.findall(r"^Message-ID:\s*<([0-9a-f]+)@unsay.local>", path.read_text(), flags=re.M))
    assert len(sent_ids) == total and set(sent_ids.values()) == {1}
    assert OutboxMessage.objects.filter(status="sent").count() == total
    assert sum(int(re.search(r"SENT (\d+)", out).group(1)) for out, _ in outputs) == total
