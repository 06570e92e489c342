"""Ingestion of real openFDA enforcement records: facts, change detection, quarantine, escalation.

Every record here is a real openFDA record from tests/fixtures/openfda/. Where a test needs a
malformed or changed record it copies a real one and breaks/changes one field, and says so.
"""

import copy
import json
import random
import zipfile
from functools import lru_cache

import pytest
from django.core.management import call_command

from demo.escalation import escalate
from memory.models import Fact
from memory.signals import facts_changed
from memory.vectors import embed_backlog
from recalls.ingest import recall_fact_key
from recalls.lots.parse import extract_lots, mentions_all_lots, parse_scope
from recalls.lots.scope import scope_terms
from recalls.models import IngestRun, QuarantinedRecord, RecallRecord
from recalls.record_fields import HASHED_FIELDS
from recalls.selectors import recall_attributes
from recalls.services import ingest_document, ingest_file
from tests.paths import OPENFDA as FIXTURES

OLD = FIXTURES / "drug-enforcement-2021-04-28.json.zip"
NEW = FIXTURES / "drug-enforcement-2023-08-05-part.json.zip"

pytestmark = pytest.mark.django_db(transaction=True)  # memory commits each claim in its own transaction


@lru_cache
def _records(path) -> tuple:
    with zipfile.ZipFile(path) as zf:
        return tuple(json.loads(zf.read(zf.namelist()[0]))["results"])


@lru_cache
def _by_number(path) -> dict:
    counts = {}
    for r in _records(path):
        counts[r["recall_number"]] = counts.get(r["recall_number"], 0) + 1
    return {r["recall_number"]: r for r in _records(path) if r["recall_number"] and counts[r["recall_number"]] == 1}


def _doc(records):
    return {"meta": {"results": {"total": len(records)}}, "results": [copy.deepcopy(r) for r in records]}


def _sartans(n):
    unique = _by_number(OLD)
    picked = [r for r in _records(OLD) if "valsartan" in r["product_description"].lower()
              and r["recall_number"] in unique]
    return picked[:n]


def test_real_records_become_lot_and_drug_level_facts(hashing_embeddings):
    records = _sartans(8) + [r for r in _records(OLD) if r["code_info"].strip().lower() == "all lots"][:2]
    run = ingest_document(_doc(records))
    assert run.status == IngestRun.Status.SUCCEEDED and run.quarantined == 0
    assert run.fetched == len(records) and run.new_facts == Fact.objects.count() > 0
    for record in records:
        facts = Fact.objects.filter(attributes__recall_number=record["recall_number"])
        lots = extract_lots(record["code_info"])
        if lots and not mentions_all_lots(record["code_info"]):
            assert {f.lot for f in facts} == set(lots)
            assert all(f.fact_key == recall_fact_key(record["recall_number"], f.lot) for f in facts)
        else:
            (fact,) = facts
            assert fact.lot is None and fact.fact_key == f"recall:{record['recall_number']}:drug"
            assert fact.attributes["scope"] == "drug" and "all lots" in fact.statement
        for fact in facts:
            assert fact.kind == "recall" and fact.source == "openfda:enforcement"
            assert fact.attributes["classification"] == record["classification"]
            assert fact.attributes["status"] == record["status"]
            assert fact.statement.startswith(f"{record['classification']} recall {record['recall_number']} "
                                             f"({record['status']}) of ")
            assert fact.valid_from.strftime("%Y%m%d") == record["recall_initiation_date"]
            assert (fact.valid_to.strftime("%Y%m%d") if fact.valid_to else "") == (record.get("termination_date") or "")
    valsartan = Fact.objects.filter(subject="valsartan")
    assert valsartan.exists()


def test_reingesting_the_same_snapshot_writes_nothing_and_embeds_nothing(hashing_embeddings):
    records = _sartans(8) + list(_records(NEW)[:12])
    first = ingest_document(_doc(records))
    assert first.new_facts > 0 and first.embedding_calls == 0  # believed now, embedded by the stage after
    assert embed_backlog().facts == first.new_facts and hashing_embeddings.calls > 0
    facts_before = Fact.objects.count()
    calls_before = hashing_embeddings.calls
    again = ingest_document(_doc(records), workers=2)
    assert (again.new_facts, again.new_versions, again.retracted, again.embedding_calls) == (0, 0, 0, 0)
    assert again.unchanged == len(records)
    assert embed_backlog().facts == 0 and hashing_embeddings.calls == calls_before
    assert Fact.objects.count() == facts_before



def test_a_no_op_reingest_parses_no_record_and_a_changed_one_is_parsed(hashing_embeddings, monkeypatch):
    """The no-op path compares the raw record's hash before parsing (a re-ingest must run at
    thousands of records/s); a changed record and a duplicate still go through the full parse."""
    import recalls.ingesters as ingesters

    records = _sartans(6)
    ingest_document(_doc(records))
    parsed = []
    real = ingesters.parse_enforcement
    monkeypatch.setattr(ingesters, "parse_enforcement", lambda raw: parsed.append(raw["recall_number"]) or real(raw))
    again = ingest_document(_doc(records))
    assert parsed == [] and again.unchanged == len(records)
    changed = copy.deepcopy(records)
    changed[0]["status"] = "Terminated" if changed[0]["status"] != "Terminated" else "Ongoing"
    run = ingest_document(_doc(changed + [copy.deepcopy(changed[1])]))
    assert parsed == [changed[0]["recall_number"], changed[1]["recall_number"]]  # the changed one, the duplicate
    assert run.new_versions >= 1 and run.unchanged == len(records)  # 5 at sight + the duplicate of an unchanged one

def _changed_only(fields):
    """Recall numbers whose old and new records differ in exactly `fields` (compared raw)."""
    old, new = _by_number(OLD), _by_number(NEW)
    out = []
    for number in sorted(set(old) & set(new)):
        differing = {k for k in set(old[number]) | set(new[number]) if old[number].get(k) != new[number].get(k)}
        if differing == set(fields):
            out.append(number)
    return out


@pytest.mark.parametrize("fields", [("openfda",), ("more_code_info",)])
def test_openfda_block_or_more_code_info_null_to_empty_alone_creates_no_version(hashing_embeddings, fields):
    numbers = _changed_only(fields)[:10]
    assert len(numbers) == 10  # real pairs from the two snapshots
    old, new = _by_number(OLD), _by_number(NEW)
    ingest_document(_doc([old[n] for n in numbers]))
    calls = hashing_embeddings.calls
    run = ingest_document(_doc([new[n] for n in numbers]))
    assert (run.new_versions, run.new_facts, run.retracted, run.embedding_calls) == (0, 0, 0, 0)
    assert run.unchanged == 10 and hashing_embeddings.calls == calls


def _expected_change(old, new):
    """(new versions, new facts, retracted) for ingesting `new` over `old`, computed from the raw fields."""
    def keys(record):
        scope = parse_scope(record.get("code_info") or "", record.get("more_code_info") or "")
        if scope.kind == "lots":
            return {f"lot:{lot}" for lot in scope.lot_numbers}, scope
        return {"drug"}, scope

    def terms(scope, key):  # the scope part a fact's content hash carries (recalls.lots.scope_terms)
        attribute = scope.as_attribute()
        return scope_terms(attribute if key == "drug" else attribute.for_lot(key[len("lot:"):]))

    old_keys, old_scope = keys(old)
    new_keys, new_scope = keys(new)
    content = [f for f in HASHED_FIELDS if f not in ("code_info", "more_code_info")]
    if any((old.get(f) or "") != (new.get(f) or "") for f in content):
        versions = len(old_keys & new_keys)  # statement / attributes of every surviving fact changed
    else:  # the "all lots" wording of the drug-level fact, or a fact's window / uncertain flag
        versions = sum(1 for key in old_keys & new_keys
                       if terms(old_scope, key) != terms(new_scope, key)
                       or (key == "drug" and old_scope.says_all_lots != new_scope.says_all_lots))
    return versions, len(new_keys - old_keys), len(old_keys - new_keys)


def test_older_then_newer_snapshot_versions_exactly_the_changed_records(hashing_embeddings):
    old, new = _by_number(OLD), _by_number(NEW)
    both = sorted(set(old) & set(new))
    amended = [n for n in both if old[n]["code_info"] != new[n]["code_info"]]
    status_changed = [n for n in both if old[n]["status"] != new[n]["status"]]
    others = [n for n in both if n not in amended and n not in status_changed]
    rng = random.Random(4)
    picked = sorted(set(amended) | set(rng.sample(status_changed, 60))
                    | set(rng.sample(others, 300 - 60 - len(amended))))
    assert len(picked) == 300 and set(amended) <= set(picked)

    expected = [0, 0, 0]
    changed_records = 0
    for number in picked:
        delta = _expected_change(old[number], new[number])
        expected = [a + b for a, b in zip(expected, delta, strict=True)]
        changed_records += any(delta)
    assert expected[0] > 0 and expected[2] > 0  # the slice really has status changes and dropped lots

    first = ingest_document(_doc([old[n] for n in picked]), workers=4)
    assert first.quarantined == 0
    second = ingest_document(_doc([new[n] for n in picked]), workers=4)
    assert [second.new_versions, second.new_facts, second.retracted] == expected
    assert second.unchanged == 300 - changed_records
    # Dropped lots are retracted with a reason and no successor; amended recalls keep their other lots.
    dropped = Fact.objects.filter(retracted_at__isnull=False, superseded_by__isnull=True, kind="recall")
    assert dropped.count() == expected[2]
    assert all("no longer listed" in f.retraction_reason for f in dropped)


def test_lots_dropped_from_an_amended_recall_are_retracted_with_a_reason(hashing_embeddings):
    old, new = _by_number(OLD), _by_number(NEW)
    number = "D-577-2013"  # real amendment: openFDA's 2023 text lists different lots than 2021's
    dropped = set(extract_lots(old[number]["code_info"])) - set(extract_lots(new[number]["code_info"]))
    assert dropped
    ingest_document(_doc([old[number]]))
    seen = []
    listen = _retractions_into(seen)
    facts_changed.connect(listen, weak=False)
    try:
        run = ingest_document(_doc([new[number]]))
    finally:
        facts_changed.disconnect(listen)
    # A surviving lot is re-versioned only if it became (un)certain: the 2021 text splits 10107747 at
    # openFDA's 4,000-character re-wrap (recalls.lots: flagged uncertain), the 2023 text does not.
    old_scope, new_scope = parse_scope(old[number]["code_info"]), parse_scope(new[number]["code_info"])
    flipped = (set(old_scope.uncertain) ^ set(new_scope.uncertain)) & set(old_scope.lot_numbers) & set(
        new_scope.lot_numbers)
    assert flipped == {"10107747"}
    assert run.retracted == len(dropped) and run.new_versions == len(flipped)
    for lot in dropped:
        fact = Fact.objects.get(fact_key=recall_fact_key(number, lot))
        assert fact.retracted_at is not None
        assert f"lot {lot} is no longer listed in recall {number}" in fact.retraction_reason
    # The sweep hook hears about every retraction, after commit, with no successor (and about the
    # re-versioned lot, with its successor: the sweep re-decides what leaned on it).
    assert len([1 for _, new_id in seen if new_id is None]) == len(dropped)
    assert len([1 for _, new_id in seen if new_id is not None]) == len(flipped)


def test_malformed_records_are_quarantined_and_the_run_goes_on(hashing_embeddings):
    good = _sartans(3)
    base = good[0]
    no_number = copy.deepcopy(base) | {"recall_number": ""}                 # broken copies of a real record
    bad_date = copy.deepcopy(base) | {"recall_number": "X-1", "recall_initiation_date": "2021-13-45"}
    wrong_type = copy.deepcopy(base) | {"recall_number": "X-2", "status": ["Ongoing"]}
    not_object = "just a string"
    run = ingest_document(_doc([no_number, good[1], bad_date, wrong_type, not_object, good[2]]))
    assert run.status == IngestRun.Status.SUCCEEDED
    assert run.quarantined == 4 and run.fetched == 6
    reasons = sorted(QuarantinedRecord.objects.filter(run=run).values_list("reason", flat=True))
    assert any("missing recall_number" in r for r in reasons)
    assert any("recall_initiation_date '2021-13-45' is not a YYYYMMDD date" in r for r in reasons)
    assert any("status should be text, got list" in r for r in reasons)
    assert any("should be a JSON object" in r for r in reasons)
    raw = QuarantinedRecord.objects.get(run=run, recall_number="X-1").raw
    assert raw["product_description"] == base["product_description"]  # kept verbatim
    good_numbers = [good[1]["recall_number"], good[2]["recall_number"]]
    assert Fact.objects.filter(attributes__recall_number__in=good_numbers).exists()
    assert not Fact.objects.filter(attributes__recall_number__in=["X-1", "X-2"]).exists()


def test_duplicate_recall_numbers_in_one_snapshot_keep_the_first_under_the_number(hashing_embeddings):
    dupes = [r for r in _records(OLD) if r["recall_number"] == "D-0121-2021"]  # real duplicate in the bulk file
    assert len(dupes) == 2
    run = ingest_document(_doc(dupes))
    assert run.quarantined == 0
    first = Fact.objects.exclude(fact_key__contains=":record:").get(attributes__recall_number="D-0121-2021")
    assert recall_attributes(first)["reason"] == dupes[0]["reason_for_recall"]
    other = Fact.objects.get(attributes__recall_number="D-0121-2021", fact_key__contains=":record:")
    assert recall_attributes(other)["reason"] == dupes[1]["reason_for_recall"] and other.attributes["record_flag"]
    again = ingest_document(_doc(dupes))
    assert (again.new_versions, again.new_facts) == (0, 0)


def test_escalate_versions_the_real_recall_and_notifies_the_sweep_hook(hashing_embeddings):
    record = next(r for r in _sartans(40) if r["classification"] == "Class II" and r["status"] == "Ongoing")
    ingest_document(_doc([record]))
    facts = list(Fact.objects.filter(attributes__recall_number=record["recall_number"]).order_by("fact_key"))
    lot = facts[0].lot
    seen = []
    listen = _retractions_into(seen)
    facts_changed.connect(listen, weak=False)
    try:
        results = escalate(record["recall_number"], "Class I", lot=lot, by="test")
    finally:
        facts_changed.disconnect(listen)
    (result,) = results
    assert (result.old_version, result.new_version) == (1, 2)
    assert (result.old_classification, result.new_classification) == ("Class II", "Class I")
    new = Fact.objects.get(fact_key=facts[0].fact_key, retracted_at__isnull=True)
    assert new.source == "demo:escalation" and new.attributes["classification"] == "Class I"
    assert new.statement.startswith(f"Class I recall {record['recall_number']}")
    assert seen == [(facts[0].id, new.id)]
    # Other lots of the recall are untouched; escalating again changes nothing.
    assert all(Fact.objects.get(pk=f.pk).retracted_at is None for f in facts[1:])
    assert escalate(record["recall_number"], "Class I", lot=lot)[0].status == "unchanged"
    # A later re-ingest of the unchanged openFDA record does not undo the staged escalation.
    ingest_document(_doc([record]))
    assert Fact.objects.get(fact_key=facts[0].fact_key, retracted_at__isnull=True).id == new.id


def test_escalate_command_prints_what_was_superseded(hashing_embeddings, capsys):
    record = _sartans(1)[0]
    ingest_document(_doc([record]))
    count = Fact.objects.filter(attributes__recall_number=record["recall_number"]).count()
    call_command("escalate", "--recall-number", record["recall_number"], "--classification", "Class I")
    out = capsys.readouterr().out
    assert out.count("v1 -> v2") == count and f"{record['classification']} -> Class I" in out
    with pytest.raises(Exception, match="no believed recall fact"):
        call_command("escalate", "--recall-number", "D-0000-0000", "--classification", "Class I")


def test_ingest_command_reads_bulk_zip_and_api_json(hashing_embeddings, tmp_path, capsys):
    records = _sartans(5)
    bulk = tmp_path / "slice.json.zip"
    with zipfile.ZipFile(bulk, "w") as zf:
        zf.writestr("drug-enforcement-0001-of-0001.json", json.dumps(_doc(records)))
    call_command("ingest_recalls", "--file", str(bulk), "--no-progress", "--workers", "1")
    assert "5 records" in capsys.readouterr().out
    api = tmp_path / "page.json"
    api.write_text(json.dumps(_doc(records)))
    call_command("ingest_recalls", "--file", str(api), "--no-progress")
    out = capsys.readouterr().out
    assert "0 new facts, 0 new versions" in out and "0 embedding calls" in out
    assert RecallRecord.objects.count() == 5
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(Exception, match="not JSON"):
        call_command("ingest_recalls", "--file", str(bad), "--no-progress")


def test_real_snapshot_file_ingests_without_crashing(hashing_embeddings):
    run = ingest_file(FIXTURES / "drug-enforcement-recent-sample.json", workers=2)
    assert run.status == IngestRun.Status.SUCCEEDED
    assert run.fetched == 149 and run.quarantined == 0
    assert run.new_facts == Fact.objects.filter(kind="recall").count()


def test_a_record_that_fails_midway_leaves_none_of_its_facts_and_is_quarantined(hashing_embeddings, monkeypatch):
    """Nothing half-written: a record's new versions, dropped-lot retractions and change-detection
    state commit together, or not at all."""
    from recalls import ingesters

    records = [r for r in _sartans(8) if len(extract_lots(r["code_info"])) >= 2][:2]
    assert len(records) == 2
    failing = records[0]["recall_number"]
    ingester_cls = next(cls for cls in vars(ingesters).values()
                        if isinstance(cls, type) and hasattr(cls, "_remember"))
    original = ingester_cls._remember

    def remember_then_fail(self, parsed, subject, ndcs):
        original(self, parsed, subject, ndcs)
        if parsed.recall_number == failing:
            raise RuntimeError("disk on fire after the facts were written")

    monkeypatch.setattr(ingester_cls, "_remember", remember_then_fail)
    run = ingest_document(_doc(records))
    assert run.quarantined == 1
    assert "disk on fire" in QuarantinedRecord.objects.get(run=run).reason
    assert not Fact.objects.filter(attributes__recall_number=failing).exists()
    assert not RecallRecord.objects.filter(recall_number=failing).exists()
    assert Fact.objects.filter(attributes__recall_number=records[1]["recall_number"]).count() >= 2


def test_a_chunks_records_commit_in_groups_and_each_group_announces_its_changes_once(hashing_embeddings,
                                                                                      monkeypatch):
    """Real records of one chunk are written RECORDS_PER_TRANSACTION to a transaction: what a commit
    sets off (shelf matching, the sweep trigger) runs once per group, with every fact of the group."""
    from recalls import ingesters

    monkeypatch.setattr(ingesters, "RECORDS_PER_TRANSACTION", 3)
    records = _sartans(8)
    announced = []

    def receiver(sender, pairs, **kwargs):
        announced.append(len(pairs))

    facts_changed.connect(receiver, weak=False)
    try:
        run = ingest_document(_doc(records))
    finally:
        facts_changed.disconnect(receiver)
    assert run.status == IngestRun.Status.SUCCEEDED and run.quarantined == 0
    assert len(announced) == 3  # 8 records: groups of 3, 3 and 2
    assert sum(announced) == run.new_facts == Fact.objects.filter(kind="recall").count()
    assert RecallRecord.objects.count() == len({r["recall_number"] for r in records})


def test_a_run_whose_heartbeat_stopped_is_marked_abandoned_when_the_next_run_starts(hashing_embeddings, settings):
    """A killed ingest (SIGKILL, OOM) cannot mark its own row; the next run does, and leaves a live one alone."""
    from datetime import timedelta

    from django.utils import timezone

    settings.UNSAY_INGEST_HEARTBEAT_TIMEOUT = 600
    settings.UNSAY_RUN_LOCKS = False  # as on CockroachDB (no advisory locks): heartbeats decide
    now = timezone.now()
    killed = IngestRun.objects.create(source="file", started=now - timedelta(hours=2),
                                      heartbeat=now - timedelta(hours=1))
    never_beat = IngestRun.objects.create(source="file", started=now - timedelta(hours=3))
    live = IngestRun.objects.create(source="file", started=now - timedelta(hours=2),
                                    heartbeat=now - timedelta(seconds=30))
    run = ingest_document(_doc(_sartans(2)))
    assert run.status == IngestRun.Status.SUCCEEDED and run.heartbeat >= run.started
    for row in (killed, never_beat):
        row.refresh_from_db()
        assert row.status == IngestRun.Status.FAILED and row.finished and "abandoned" in row.error
    live.refresh_from_db()
    assert live.status == IngestRun.Status.RUNNING and not live.error


def test_a_run_whose_run_lock_is_free_is_dead_at_once_and_a_live_one_is_left_alone(hashing_embeddings):
    """PostgreSQL: a live run holds the advisory lock of its id (core.runlock), however old its
    heartbeat; a run whose lock is free is dead, however fresh. (A real SIGKILL: test_run_locks_procs.)"""
    from datetime import timedelta

    from django.utils import timezone

    from core.runlock import RunLock
    from recalls.runs import RUN_LOCK

    now = timezone.now()
    killed = IngestRun.objects.create(source="file", started=now, heartbeat=now)
    slow = IngestRun.objects.create(source="file", started=now - timedelta(hours=3), heartbeat=now - timedelta(hours=2))
    with RunLock(RUN_LOCK, slow.pk):
        run = ingest_document(_doc(_sartans(2)))
    assert run.status == IngestRun.Status.SUCCEEDED
    killed.refresh_from_db()
    slow.refresh_from_db()
    assert killed.status == IngestRun.Status.FAILED and "process is gone" in killed.error
    assert slow.status == IngestRun.Status.RUNNING


def _retractions_into(heard: list):
    """A memory.signals.facts_changed receiver keeping the retractions, (old, new-or-None), in order."""
    def receiver(sender, pairs, **kwargs):
        heard.extend(pair for pair in pairs if pair[0] is not None)
    return receiver


def _published_twice():
    """Real recall numbers the 2021 snapshot holds more than one different record under."""
    by_number = {}
    for record in _records(OLD):
        if record["recall_number"]:
            by_number.setdefault(record["recall_number"], []).append(record)
    return {number: rs for number, rs in by_number.items() if len(rs) > 1}


def test_a_recall_number_published_twice_keeps_both_records_flagged(hashing_embeddings):
    twice = _published_twice()
    assert len(twice) >= 10  # D-0418-2015, D-1442-2016, D-0821-2018, ...: other firms, other products
    records = [r for rs in twice.values() for r in rs]
    run = ingest_document(_doc(records))
    assert run.quarantined == 0, list(QuarantinedRecord.objects.values_list("recall_number", "reason"))
    for number, rs in twice.items():
        believed = Fact.objects.believed().filter(kind="recall", attributes__recall_number=number)
        products = {recall_attributes(f)["product_description"] for f in believed}
        assert products == {r["product_description"] for r in rs}, number  # every record's product is believed
        others = [f for f in believed if ":record:" in f.fact_key]
        assert others and all("also used by another record" in f.attributes["record_flag"] for f in others)
        assert not any("record_flag" in f.attributes for f in believed if ":record:" not in f.fact_key)
        assert RecallRecord.objects.filter(recall_number__startswith=number).count() == len(rs)
    # Sending the same file again changes nothing: no record retracts another's lots.
    facts_before = Fact.objects.count()
    again = ingest_document(_doc(records))
    assert again.quarantined == 0 and again.retracted == 0 and Fact.objects.count() == facts_before


def test_an_overlong_reason_is_kept_cut_and_flagged_never_quarantined(hashing_embeddings):
    """A real record with its reason_for_recall blown up to 5,000,000 characters (a hostile or broken
    feed): the record is ingested, every fact carries the reason cut to its limit and says so."""
    record = copy.deepcopy(_sartans(1)[0])
    record["reason_for_recall"] = record["reason_for_recall"] + " x" * 2_500_000
    run = ingest_document(_doc([record]))
    assert run.quarantined == 0
    facts = list(Fact.objects.believed().filter(kind="recall", attributes__recall_number=record["recall_number"]))
    assert facts
    for fact in facts:
        reason = recall_attributes(fact)["reason"]
        assert len(reason) <= 4000 and reason.endswith("…")
        assert "reason_for_recall is 5,000,2" in fact.attributes["text_flag"]
        assert len(fact.statement) < 2000
