"""assert_claim / retract_claim: idempotency, versioning, and races between real parallel connections."""

import json
import threading
import time
from collections import defaultdict

import pytest
from django.db import connection, connections
from django.db.models import F
from django.utils import timezone

from core.retry import run_in_transaction
from memory.decisions import ReadSpec, record_decision
from memory.fact_writes import Claim, assert_claim, assert_claims, retract_claim
from memory.models import Fact, ReadSetMember
from memory.signals import facts_changed
from tests.procs import start_python


def note(key, statement, **extra):
    return Claim(fact_key=key, kind="note", subject="valsartan", statement=statement, source="manual", **extra)


def assert_dense_chain(key, expected_versions):
    """Versions 1..n, exactly one believed (the last), each retracted one pointing at its successor."""
    chain = list(Fact.objects.filter(fact_key=key).order_by("version").defer("embedding"))
    assert [f.version for f in chain] == list(range(1, expected_versions + 1)), key
    assert [f.version for f in chain if f.retracted_at is None] == [expected_versions], key
    for older, newer in zip(chain, chain[1:], strict=False):
        assert older.superseded_by_id == newer.id
        assert older.retracted_at == newer.asserted_at
        assert older.asserted_at <= older.retracted_at


@pytest.mark.django_db(transaction=True)
def test_asserting_the_same_content_twice_writes_one_version_and_embeds_once(hashing_embeddings):
    from memory.vectors import embed_backlog

    first = assert_claim(note("note:idem", "valsartan lot A1 recalled", attributes={"a": 1}))
    second = assert_claim(note("note:idem", "valsartan lot A1 recalled", attributes={"a": 1}, source_ref="other"))
    assert (first.status, second.status) == ("created", "unchanged")
    assert not second.wrote and second.fact.id == first.fact.id
    assert Fact.objects.filter(fact_key="note:idem").count() == 1
    assert hashing_embeddings.calls == 0  # the write embeds nothing; the stage embeds the one version once
    assert embed_backlog().facts == 1 and embed_backlog().facts == 0
    assert hashing_embeddings.calls == 1


@pytest.mark.django_db(transaction=True)
def test_a_batch_with_nothing_changed_makes_no_embedding_call(hashing_embeddings):
    from memory.vectors import embed_backlog

    claims = [note(f"note:batch:{i}", f"statement {i}") for i in range(5)]
    assert [r.status for r in assert_claims(claims)] == ["created"] * 5
    embed_backlog()
    assert hashing_embeddings.calls == 1  # one batched call for all five
    assert [r.status for r in assert_claims(claims)] == ["unchanged"] * 5
    embed_backlog()
    assert hashing_embeddings.calls == 1
    changed = claims[:2] + [note("note:batch:2", "statement 2, amended")] + claims[3:]
    statuses = [r.status for r in assert_claims(changed)]
    assert statuses == ["unchanged", "unchanged", "versioned", "unchanged", "unchanged"]
    embed_backlog()
    assert (hashing_embeddings.calls, hashing_embeddings.texts) == (2, 6)
    assert_dense_chain("note:batch:2", 2)


@pytest.mark.django_db(transaction=True)
def test_one_batch_naming_a_key_twice_versions_in_order_and_skips_repeats(hashing_embeddings):
    results = assert_claims([note("note:dup", "first"), note("note:dup", "first"), note("note:dup", "second")])
    assert [r.status for r in results] == ["created", "unchanged", "versioned"]
    assert_dense_chain("note:dup", 2)


@pytest.mark.django_db(transaction=True)
def test_changed_content_retracts_the_old_version_with_the_reason(hashing_embeddings):
    assert_claim(note("note:chg", "Class II"))
    result = assert_claim(note("note:chg", "Class I"), reason="reclassified by FDA")
    assert result.status == "versioned" and result.previous.version == 1
    assert result.previous.retraction_reason == "reclassified by FDA"
    assert_dense_chain("note:chg", 2)


@pytest.mark.django_db(transaction=True)
def test_retract_claim_records_the_reason_and_leaves_nothing_believed(hashing_embeddings):
    assert_claim(note("note:ret", "will be withdrawn"))
    with pytest.raises(ValueError, match="needs a reason"):
        retract_claim("note:ret", reason="")
    retracted = retract_claim("note:ret", reason="recall withdrawn by firm", by="pharmacist:ann")
    assert retracted.retraction_reason == "recall withdrawn by firm" and retracted.retracted_by == "pharmacist:ann"
    assert not Fact.objects.believed().filter(fact_key="note:ret").exists()
    assert retract_claim("note:ret", reason="again") is None
    # Asserting again after a retraction starts version 2, not a new chain.
    assert assert_claim(note("note:ret", "re-issued")).fact.version == 2


@pytest.mark.django_db(transaction=True)
def test_supersession_listeners_hear_after_commit(hashing_embeddings):

    heard = []
    listen = _retractions_into(heard)
    facts_changed.connect(listen, weak=False)
    try:
        v1 = assert_claim(note("note:listen", "one")).fact
        v2 = assert_claim(note("note:listen", "two")).fact
        retract_claim("note:listen", reason="gone")
    finally:
        facts_changed.disconnect(listen)
    assert heard == [(v1.id, v2.id), (v2.id, None)]


# --- Races between real connections -----------------------------------------------------------


def _connection_headroom() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('max_connections')::int - count(*) FROM pg_stat_activity")
        return cursor.fetchone()[0]


def _race(writers, work, *, max_open=None):
    """Run `work(i)` on `writers` threads, each with its own database connection, released together
    by a barrier so they really race on 2 cores. `max_open` caps connections held at once."""
    slots = threading.BoundedSemaphore(max_open or writers)
    barrier = threading.Barrier(writers)
    outcomes = [None] * writers

    def run(i):
        try:
            barrier.wait(timeout=60)
            with slots:
                try:
                    outcomes[i] = ("ok", work(i))
                finally:
                    connections.close_all()
        except Exception as exc:  # recorded, asserted on below
            outcomes[i] = ("error", repr(exc))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return outcomes


def _assert_then_read(key, statement):
    result = assert_claim(note(key, statement))
    decision = run_in_transaction(lambda: record_decision(
        question=f"is {key} safe", verdict="safe", answer="yes", reasoner="test",
        reads=[ReadSpec(result.fact, rank=1, score=1.0, load_bearing=True)]))
    return result.fact.version, decision.id


def assert_no_orphaned_reads():
    """Every read names a stored version whose key and number match what the decision recorded."""
    mismatched = ReadSetMember.objects.exclude(fact__fact_key=F("fact_key")) | ReadSetMember.objects.exclude(
        fact__version=F("fact_version"))
    assert mismatched.count() == 0



@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_64_threads_racing_16_per_key_leave_dense_chains(hashing_embeddings):
    if _connection_headroom() < 64 + 5:
        pytest.skip("the shared server has too few free connections for 64 parallel writers")
    outcomes = _race(64, lambda i: _assert_then_read(f"race:{i % 4}", f"writer {i} says {i}"))
    failures = [o for o in outcomes if o is None or o[0] != "ok"]
    assert failures == []
    for k in range(4):
        assert_dense_chain(f"race:{k}", 16)
        assert sorted(v for (status, (v, _)), i in zip(outcomes, range(64), strict=True) if i % 4 == k) == list(
            range(1, 17))
    assert ReadSetMember.objects.count() == 64  # 64 distinct versions read: 64 sets of one
    assert_no_orphaned_reads()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_128_writers_on_128_distinct_keys_all_land(hashing_embeddings):
    # The embedded server allows 100 connections shared by every test session, so at most
    # `max_open` of the 128 racing writers hold a connection at one time.
    max_open = max(8, min(128, _connection_headroom() - 20))
    outcomes = _race(128, lambda i: _assert_then_read(f"solo:{i}", f"writer {i}"), max_open=max_open)
    assert [o for o in outcomes if o is None or o[0] != "ok"] == []
    assert Fact.objects.filter(fact_key__startswith="solo:").count() == 128
    assert Fact.objects.believed().filter(fact_key__startswith="solo:", version=1).count() == 128
    assert_no_orphaned_reads()


PROCESS_WRITER = """
import json, os, sys, threading, time
from django.db import connections
from memory.decisions import ReadSpec, record_decision
from memory.fact_writes import Claim, assert_claim
from core.retry import run_in_transaction

proc, threads, keys = int(os.environ["W_PROC"]), int(os.environ["W_THREADS"]), int(os.environ["W_KEYS"])
go_file = os.environ["W_GO"]
connected = threading.Barrier(threads + 1)
results = []

def write(t):
    writer = proc * threads + t
    key = f"proc-race:{writer % keys}"
    try:
        connections["default"].ensure_connection()
        connected.wait(60)
        while not os.path.exists(go_file):
            time.sleep(0.002)
        fact = assert_claim(Claim(fact_key=key, kind="note", subject="race", source="manual",
                                  statement=f"process {proc} thread {t}")).fact
        run_in_transaction(lambda: record_decision(question=key, verdict="safe", answer="ok", reasoner="test",
                                                   reads=[ReadSpec(fact, rank=1, score=1.0, load_bearing=True)]))
        results.append(["ok", key, fact.version])
    except Exception as exc:
        results.append(["error", key, repr(exc)])
    finally:
        connections.close_all()

workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
for w in workers:
    w.start()
connected.wait(60)
print("ready", flush=True)
for w in workers:
    w.join()
print(json.dumps(results), flush=True)
"""


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_4_processes_x_16_threads_racing_on_4_keys(hashing_embeddings, tmp_path):
    """64 writers in 4 real processes; each key's 16 racers come from all four processes."""
    if _connection_headroom() < 64 + 5:
        pytest.skip("the shared server has too few free connections for 64 parallel writers")
    go = tmp_path / "go"
    procs = [start_python(PROCESS_WRITER, W_PROC=p, W_THREADS=16, W_KEYS=4, W_GO=go) for p in range(4)]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        started = time.monotonic()
        go.write_text("go")
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.extend(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert time.monotonic() - started < 60
    assert [r for r in results if r[0] != "ok"] == []
    versions = defaultdict(list)
    for _, key, version in results:
        versions[key].append(version)
    assert {k: sorted(v) for k, v in versions.items()} == {f"proc-race:{k}": list(range(1, 17)) for k in range(4)}
    for k in range(4):
        assert_dense_chain(f"proc-race:{k}", 16)
    assert ReadSetMember.objects.count() == 64  # 64 distinct versions read: 64 sets of one
    assert_no_orphaned_reads()
    assert Fact.objects.filter(asserted_at__gt=timezone.now()).count() == 0


def _retractions_into(heard: list):
    """A memory.signals.facts_changed receiver keeping the retractions, (old, new-or-None), in order."""
    def receiver(sender, pairs, **kwargs):
        heard.extend(pair for pair in pairs if pair[0] is not None)
    return receiver
