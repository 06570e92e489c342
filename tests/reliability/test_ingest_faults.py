"""Faults on ingestion: one malformed record never stops a run, the quarantine row is
always writable, neighbours are written, inputs are bounded, an older snapshot never wins, and a bad
recall number cannot break the review queue. Base records are real openFDA records (copied, then one
field broken, as each test says)."""

import copy
import io
import json
import zipfile

import pytest

from demo.slice import DEMO_SLICE
from memory.models import Fact
from recalls.documents import SourceError, load_document
from recalls.ingest import parse_enforcement
from recalls.models import IngestRun, QuarantinedRecord, RecallRecord
from recalls.record_fields import Malformed, parse_openfda_date
from recalls.services import ingest_document
from tests.reliability.openfda_records import NEW, OLD, records, unique_good_records

pytestmark = pytest.mark.django_db(transaction=True)

POISONED_FIELDS = ("reason_for_recall", "product_description", "code_info", "recalling_firm",
                   "distribution_pattern", "recall_number")


def _doc(items, last_updated=None):
    meta = {"results": {"total": len(items)}}
    if last_updated:
        meta["last_updated"] = last_updated
    return {"meta": meta, "results": [copy.deepcopy(r) for r in items]}


def _assert_written(run, good):
    numbers = [r["recall_number"] for r in good]
    written = set(RecallRecord.objects.filter(recall_number__in=numbers).values_list("recall_number", flat=True))
    assert written == set(numbers), f"neighbours lost: {sorted(set(numbers) - written)}"


@pytest.mark.parametrize("field", POISONED_FIELDS)
@pytest.mark.parametrize("poison", ["\x00", "\ud800"], ids=["nul", "lone-surrogate"])
def test_a_nul_or_lone_surrogate_in_any_field_quarantines_only_that_record(hashing_embeddings, field, poison):
    # The reported case: a 10-record file where record 4 is poisoned wrote 3 and lost 7.
    good = list(unique_good_records()[:9])
    bad = copy.deepcopy(unique_good_records()[9])
    bad[field] = bad[field][:5] + poison + bad[field][5:]
    run = ingest_document(_doc(good[:3] + [bad] + good[3:]))
    assert run.status == IngestRun.Status.SUCCEEDED and run.fetched == 10 and run.quarantined == 1
    (quarantined,) = QuarantinedRecord.objects.filter(run=run)
    assert f"{field} contains" in quarantined.reason
    assert "\x00" not in json.dumps(quarantined.raw) and "\ufffd" in quarantined.raw[field]  # storable, visible
    _assert_written(run, good)


def test_an_integer_inside_package_ndc_is_ignored_and_the_chunk_is_written(hashing_embeddings):
    good = list(unique_good_records()[:20])
    odd = copy.deepcopy(unique_good_records()[20])
    odd.setdefault("openfda", {})["package_ndc"] = [123456789, None, ["nested"], "0378-1234-01"]
    run = ingest_document(_doc(good + [odd]))
    assert run.status == IngestRun.Status.SUCCEEDED and run.quarantined == 0
    _assert_written(run, good + [odd])
    assert RecallRecord.objects.get(recall_number=odd["recall_number"]).ndcs == ["00378-1234-01"]


def test_an_unexpected_validation_error_quarantines_the_record_not_the_run(hashing_embeddings, monkeypatch):
    import recalls.ingesters as ingesters

    good = list(unique_good_records()[:5])
    victim = good[2]["recall_number"]

    def flaky(raw):
        if isinstance(raw, dict) and raw.get("recall_number") == victim:
            raise AttributeError("'int' object has no attribute 'strip'")
        return parse_enforcement(raw)

    monkeypatch.setattr(ingesters, "parse_enforcement", flaky)
    run = ingest_document(_doc(good))
    assert run.status == IngestRun.Status.SUCCEEDED and run.quarantined == 1
    assert "could not be validated: AttributeError" in QuarantinedRecord.objects.get(run=run).reason
    _assert_written(run, good[:2] + good[3:])


@pytest.mark.parametrize("number", ["D-0326/2019", "../../admin", "D 0326 2019", "D-0326-2019?x", "d-0326-2019"])
def test_recall_numbers_that_are_not_fda_recall_numbers_are_quarantined(hashing_embeddings, number):
    bad = copy.deepcopy(unique_good_records()[0]) | {"recall_number": number}
    run = ingest_document(_doc([bad, unique_good_records()[1]]))
    assert run.quarantined == 1
    assert "is not an FDA recall number" in QuarantinedRecord.objects.get(run=run).reason
    assert not Fact.objects.filter(attributes__recall_number=number).exists()


def test_every_recall_number_in_the_real_fixtures_passes_the_pattern():
    from recalls.ingest import RECALL_NUMBER_PATTERN

    numbers = {r["recall_number"] for path in (OLD, NEW) for r in records(path) if r["recall_number"]}
    for path in (OLD.parent / "drug-enforcement-recent-sample.json", DEMO_SLICE):
        numbers |= {r["recall_number"] for r in json.loads(path.read_text())["results"]}
    assert len(numbers) > 13000
    assert [n for n in numbers if not RECALL_NUMBER_PATTERN.fullmatch(n)] == []


def test_a_record_listing_too_many_lots_is_quarantined_with_a_clear_reason(hashing_embeddings):
    bad = copy.deepcopy(unique_good_records()[0])
    bad["code_info"] = "Lot numbers: " + ", ".join(f"A{n:05d}" for n in range(3000))
    run = ingest_document(_doc([bad, unique_good_records()[1]]))
    assert run.quarantined == 1 and run.new_facts >= 1
    assert "lists 3000 lots; at most 1000" in QuarantinedRecord.objects.get(run=run).reason


def test_a_zip_that_inflates_past_the_limit_is_refused_before_it_is_read(tmp_path, settings):
    settings.UNSAY_INGEST_MAX_BYTES = 1_000_000
    bomb = tmp_path / "bomb.json.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("drug-enforcement.json", b'{"results": [' + b" " * 20_000_000 + b"]}")
    assert bomb.stat().st_size < 100_000  # a 20 MB member in a zip of a few KB
    with pytest.raises(SourceError, match="inflates to 20,000,015 bytes, more than 1,000,000"):
        load_document(str(bomb))


def test_a_zip_whose_header_understates_its_size_is_cut_off_by_the_bytes_actually_read(tmp_path, settings):
    settings.UNSAY_INGEST_MAX_BYTES = 1_000_000
    payload = b'{"results": [' + b" " * 3_000_000 + b"]}"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("drug-enforcement.json", payload)
    data = bytearray(buffer.getvalue())
    # Lie about the uncompressed size in the central directory (offset 24 of the entry): claim 100 bytes.
    central = data.rfind(b"PK\x01\x02")
    data[central + 24:central + 28] = (100).to_bytes(4, "little")
    lying = tmp_path / "lying.json.zip"
    lying.write_bytes(bytes(data))
    with pytest.raises(SourceError):
        load_document(str(lying))


def test_deeply_nested_json_in_a_file_is_a_source_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"results": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(SourceError, match="not JSON"):
        load_document(str(deep))


@pytest.mark.parametrize("value", ["201911", "2019011", "201901011", "18000101", "29990101", "２０１９０１０１",
                                   "٢٠١٩٠١٠١", "2019-01-01", " 20190101"])
def test_openfda_dates_are_strict(value):
    with pytest.raises(Malformed):
        parse_openfda_date(value, "report_date")


def test_real_openfda_dates_still_parse():
    assert str(parse_openfda_date("20190326", "report_date")) == "2019-03-26"
    assert str(parse_openfda_date("19000101", "x")) == "1900-01-01" and parse_openfda_date("", "x") is None


def _changed_status_records(count=25):
    """The first `count` real recalls (by number) in both the 2021 and the 2023 file, once in the 2023 one,
    whose status changed between them: (their 2021 records, their 2023 records)."""
    old = {r["recall_number"]: r for r in records(OLD)}
    new = {r["recall_number"]: r for r in records(NEW)}
    counts = {}
    for r in records(NEW):
        counts[r["recall_number"]] = counts.get(r["recall_number"], 0) + 1
    changed = [n for n in sorted(set(old) & set(new))
               if counts[n] == 1 and old[n]["status"] != new[n]["status"]][:count]
    assert len(changed) == count
    return [old[n] for n in changed], [new[n] for n in changed]


def test_an_older_snapshot_never_supersedes_newer_belief(hashing_embeddings, tmp_path):
    """The reported case: re-ingesting the 2021 file after the 2023 one moved Terminated back to Ongoing."""
    old, new = _changed_status_records()
    newer = ingest_document(_doc(new, last_updated="2023-08-05"))
    assert newer.quarantined == 0
    statuses = dict(Fact.objects.believed().filter(kind="recall").values_list("fact_key", "attributes__status"))
    replay = ingest_document(_doc(old, last_updated="2021-04-28"))
    assert replay.status == IngestRun.Status.SUCCEEDED
    assert replay.older_than_believed == 25 and (replay.new_versions, replay.retracted) == (0, 0)
    assert dict(Fact.objects.believed().filter(kind="recall").values_list("fact_key", "attributes__status")) == statuses
    # The newer one again (or a later one) still applies normally: nothing is stuck.
    again = ingest_document(_doc(new, last_updated="2023-08-05"))
    assert again.unchanged == 25 and again.older_than_believed == 0


def test_a_file_replay_without_snapshot_date_is_ordered_by_report_date(hashing_embeddings):
    base = copy.deepcopy(unique_good_records()[0])
    later = copy.deepcopy(base) | {"report_date": "20991231", "status": "Terminated"}
    ingest_document(_doc([later]))
    replay = ingest_document(_doc([base]))
    assert replay.older_than_believed == 1
    assert set(Fact.objects.believed().filter(attributes__recall_number=base["recall_number"])
               .values_list("attributes__status", flat=True)) == {"Terminated"}


def test_the_ingest_command_reports_older_than_believed(hashing_embeddings, capsys, tmp_path):
    """The 2021 records of recalls whose 2023 records are believed, given to the command as a file: it
    counts and reports them, and belief keeps the 2023 status."""
    from django.core.management import call_command

    old, new = _changed_status_records()
    ingest_document(_doc(new, last_updated="2023-08-05"))
    statuses = dict(Fact.objects.believed().filter(kind="recall").values_list("fact_key", "attributes__status"))
    older = tmp_path / "drug-enforcement-2021-04-28.json"
    older.write_text(json.dumps(_doc(old, last_updated="2021-04-28")))
    call_command("ingest_recalls", "--file", str(older), "--no-progress")
    assert f"{len(old)} older than believed" in capsys.readouterr().out
    assert dict(Fact.objects.believed().filter(kind="recall").values_list("fact_key", "attributes__status")) == statuses
