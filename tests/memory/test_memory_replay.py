"""Replay: beliefs_at against an in-memory model (hypothesis), replay_decision, both routes, the command,
and the CockroachDB MVCC route (skipped unless UNSAY_COCKROACH_URL)."""

import os
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.retry import run_in_transaction
from memory import replay
from memory.decisions import ReadSpec, record_decision
from memory.fact_writes import Claim, assert_claim, retract_claim
from memory.retrieval import beliefs_at
from tests.procs import run_python

BASE = datetime(2024, 1, 1, tzinfo=UTC)


def note(key, statement, subject="valsartan"):
    return Claim(fact_key=key, kind="note", subject=subject, statement=statement, source="manual")


operations = st.lists(
    st.tuples(
        st.sampled_from(["assert", "assert", "assert", "retract"]),
        st.integers(0, 2),                        # which key
        st.sampled_from(["A", "B", "C"]),         # content; repeats exercise "unchanged"
        st.integers(1, 3600),                     # seconds since the previous operation
    ),
    min_size=1, max_size=12,
)


@pytest.mark.django_db(transaction=True)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, probes=st.lists(st.integers(-10, 50000), min_size=1, max_size=8))
def test_beliefs_at_matches_an_in_memory_model_of_the_history(hashing_embeddings, ops, probes):
    subject = f"prop-{uuid.uuid4().hex[:12]}"  # isolates this example's rows in the shared test table
    history = {}  # key -> list of [version, statement, asserted_at, retracted_at]
    at = BASE
    for op, k, content, gap in ops:
        at += timedelta(seconds=gap)
        key = f"{subject}:{k}"
        versions = history.setdefault(key, [])
        believed = next((v for v in versions if v[3] is None), None)
        if op == "assert":
            assert_claim(note(key, f"{key} says {content}", subject), at=at)
            if believed is None or believed[1] != f"{key} says {content}":
                if believed is not None:
                    believed[3] = at
                versions.append([len(versions) + 1, f"{key} says {content}", at, None])
        else:
            retract_claim(key, reason="property test", at=at)
            if believed is not None:
                believed[3] = at
    for offset in probes + [0, (at - BASE).total_seconds()]:
        probe = BASE + timedelta(seconds=offset)
        expected = sorted((key, v[0], v[1]) for key, versions in history.items() for v in versions
                          if v[2] <= probe and (v[3] is None or v[3] > probe))
        actual = [(f.fact_key, f.version, f.statement) for f in beliefs_at(probe, subject=subject)]
        assert actual == expected, probe


@pytest.fixture
def decided(hashing_embeddings):
    """A decision that read v1 of two keys; afterwards one key got v2 and the other was retracted."""
    t0 = BASE
    lot = assert_claim(note("recall:D-1:lot:A1", "Class II recall of valsartan lot A1"), at=t0).fact
    drug = assert_claim(note("recall:D-2:drug", "all valsartan lots, Class III"), at=t0).fact
    side = assert_claim(note("label:x:warnings", "dizziness"), at=t0).fact
    decision = run_in_transaction(lambda: record_decision(
        question="is my valsartan safe", verdict="stop", answer="Stop: lot A1 is recalled", reasoner="rules/1",
        reads=[ReadSpec(lot, 1, 1.0, True), ReadSpec(drug, 2, 1.0, False), ReadSpec(side, 3, 0.4, False)],
        subject="valsartan", at=t0 + timedelta(hours=1)))
    assert_claim(note("recall:D-1:lot:A1", "Class I recall of valsartan lot A1"), at=t0 + timedelta(hours=2),
                 reason="reclassified")
    retract_claim("recall:D-2:drug", reason="recall withdrawn", at=t0 + timedelta(hours=3))
    return decision


@pytest.mark.django_db(transaction=True)
def test_replay_decision_shows_the_read_set_as_it_was_and_what_is_retracted_now(decided):
    result = replay.replay_decision_routes(decided.id)
    reads = {r["fact_key"]: r for r in result["reads"]}
    lot, drug, side = reads["recall:D-1:lot:A1"], reads["recall:D-2:drug"], reads["label:x:warnings"]
    assert (lot["version"], lot["statement"], lot["believed_at_decision"]) == (
        1, "Class II recall of valsartan lot A1", True)
    assert (lot["retracted_now"], lot["retraction_reason"], lot["superseded_by_version"]) == (True, "reclassified", 2)
    assert lot["believed_now_statement"] == "Class I recall of valsartan lot A1"
    assert (drug["retracted_now"], drug["believed_now_version"]) == (True, None)
    assert side["retracted_now"] is False
    assert result["stale"] is True  # the load-bearing read is retracted

    bitemporal, mvcc = result["routes"]
    assert bitemporal.ok and bitemporal.versions == {
        ("recall:D-1:lot:A1", 1), ("recall:D-2:drug", 1), ("label:x:warnings", 1)}
    assert (mvcc.status, mvcc.reason.startswith("unavailable on this engine")) == ("unavailable", True)


@pytest.mark.django_db(transaction=True)
def test_replay_command_prints_both_routes_for_a_key_and_for_a_decision(decided):
    out = StringIO()
    call_command("replay", "--key", "recall:D-1:lot:A1", "--at", "2024-01-01T01:30:00Z", stdout=out)
    text = out.getvalue()
    assert "[bitemporal] ok: 1 believed version(s)" in text
    assert "recall:D-1:lot:A1 v1: Class II recall of valsartan lot A1" in text
    assert "[mvcc] unavailable: unavailable on this engine (postgresql)" in text

    out = StringIO()
    call_command("replay", "--key", "recall:D-1:lot:A1", "--at", "2024-01-01 02:30", stdout=out)  # naive = UTC
    assert "v2: Class I recall" in out.getvalue()

    out = StringIO()
    call_command("replay", "--decision", str(decided.id), stdout=out)
    text = out.getvalue()
    assert "#1 recall:D-1:lot:A1 v1 [load-bearing]: Class II recall of valsartan lot A1 -- retracted" in text
    assert "(reclassified), now v2" in text and "stale now: yes" in text
    assert "[bitemporal] ok: 3 believed version(s)" in text and "[mvcc] unavailable" in text


@pytest.mark.django_db(transaction=True)
def test_replay_command_rejects_bad_input_clearly(decided):
    with pytest.raises(CommandError, match="not a timestamp"):
        call_command("replay", "--key", "k", "--at", "yesterday")
    with pytest.raises(CommandError, match="Give --key"):
        call_command("replay", "--at", "2024-01-01T00:00:00Z")
    with pytest.raises(CommandError, match="No decision with id 999999"):
        call_command("replay", "--decision", "999999")
    with pytest.raises(CommandError, match="in the future"):
        call_command("replay", "--key", "k", "--at", "2999-01-01T00:00:00Z")


COCKROACH_SCRIPT = r"""
import time
from datetime import timedelta
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from memory import replay
from memory.fact_writes import Claim, assert_claim

call_command("migrate", verbosity=0)
key = "cockroach:replay:" + str(time.time_ns())
claim = lambda s: Claim(fact_key=key, kind="note", subject="crdb", statement=s, source="manual")
with connection.cursor() as cursor:
    cursor.execute("ALTER TABLE memory_fact CONFIGURE ZONE USING gc.ttlseconds = 5")
assert_claim(claim("first"))
time.sleep(0.5)
between = timezone.now()
time.sleep(0.5)
assert_claim(claim("second"))
fresh = replay.replay_at(between, fact_key=key)
assert [r.status for r in fresh["routes"]] == ["ok", "ok"], fresh
assert fresh["routes"][0].versions == fresh["routes"][1].versions == {(key, 1)}
time.sleep(7)
old = replay.replay_at(between, fact_key=key)
bitemporal, mvcc = old["routes"]
assert bitemporal.ok and bitemporal.versions == {(key, 1)}
assert mvcc.status == "failed" and replay.GC_THRESHOLD_ERROR in mvcc.reason, mvcc
print("OK")
"""


@pytest.mark.cockroach
@pytest.mark.skipif(not os.environ.get("UNSAY_COCKROACH_URL"), reason="needs UNSAY_COCKROACH_URL")
def test_cockroach_mvcc_route_answers_then_fails_past_the_gc_threshold():
    result = run_python(COCKROACH_SCRIPT, timeout=180, DATABASE_URL=os.environ["UNSAY_COCKROACH_URL"])
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-3000:]
