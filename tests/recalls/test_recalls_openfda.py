"""The openFDA client against a local HTTP server (127.0.0.1, a thread) that replays pages built
from real recorded openFDA records: paging, the skip cap, retries with backoff, errors, and the
fetch -> archive -> ingest -> re-ingest-from-archive path. No network."""

import io
import json
import threading
import time
import zipfile
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import pytest
from botocore.stub import Stubber

from recalls import archive, openfda
from recalls.models import IngestRun
from recalls.openfda import OpenFDAClient, OpenFDAError
from tests.paths import OPENFDA as FIXTURES


def _recorded_records():
    with zipfile.ZipFile(FIXTURES / "drug-enforcement-2023-08-05-part.json.zip") as zf:
        document = json.loads(zf.read(zf.namelist()[0]))
    return document["meta"], document["results"]


META, RECORDS = _recorded_records()


class ReplayServer:
    """Serves /drug/enforcement.json like openFDA: search report_date:[A TO B], limit, skip, the
    404 NOT_FOUND body for no matches, and scripted failures before the real answer."""

    def __init__(self, records):
        self.records = sorted(records, key=lambda r: (r.get("report_date") or r.get("effective_time"),
                                                      r.get("recall_number") or r.get("id")))
        self.failures = []  # (status, body, headers) served before normal answers
        self.requests = []
        self.delay = 0.0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append(unquote(self.path))  # as sent; the client may percent-encode
                if server.delay:
                    time.sleep(server.delay)
                if server.failures:
                    status, body, headers = server.failures.pop(0)
                    return self._send(status, body, headers)
                url = urlparse(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                limit, skip = int(query.get("limit", 1)), int(query.get("skip", 0))
                if limit > openfda.MAX_LIMIT or skip > 25000:
                    return self._send(400, {"error": {"code": "BAD_REQUEST", "message": "Limit/skip out of range"}})
                matches = [r for r in server.records if _matches(r, query.get("search", ""))]
                if not matches:
                    return self._send(404, {"error": {"code": "NOT_FOUND", "message": "No matches found!"}})
                page = matches[skip:skip + limit]
                meta = dict(META, results={"skip": skip, "limit": limit, "total": len(matches)})
                self._send(200, {"meta": meta, "results": page})

            def _send(self, status, body, headers=None):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (a test's timeout or a stopped ingest): nothing to serve

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _matches(record, search):
    """The subset of openFDA's search syntax the client uses: field:[A TO B] and field:"value", joined by AND."""
    for clause in filter(None, search.split(" AND ")):
        field, _, value = clause.partition(":")
        if value.startswith("["):
            low, _, high = value[1:-1].partition(" TO ")
            if not (record.get(field) and low <= record[field] <= high):
                return False
        elif record.get(field) != value.strip('"'):
            return False
    return True


def _incremental_expected(since, until):
    return {json.dumps(r, sort_keys=True) for r in RECORDS
            if since <= r["report_date"] <= until or since <= (r.get("termination_date") or "") <= until
            or (r["status"] == "Ongoing" and r["report_date"] <= until)}


@pytest.fixture
def server():
    replay = ReplayServer(RECORDS)
    yield replay
    replay.close()


def _client(server, **kwargs):
    sleeps = []
    kwargs.setdefault("page_size", 100)
    client = OpenFDAClient(base_url=server.url, api_key="", timeout=2, sleep=sleeps.append, **kwargs)
    return client, sleeps


def _window(low, high):
    return [r for r in RECORDS if low <= r["report_date"] <= high]


def test_pages_through_a_report_date_window(server):
    client, sleeps = _client(server)
    document = client.fetch_enforcement(date(2019, 1, 1), date(2019, 12, 31))
    expected = _window("20190101", "20191231")
    assert len(expected) > 200  # several pages
    assert [r["recall_number"] for r in document["results"]] == [
        r["recall_number"] for r in sorted(expected, key=lambda r: (r["report_date"], r["recall_number"]))]
    assert document["meta"]["results"]["total"] == len(expected)
    page_requests = [p for p in server.requests if "limit=100" in p]
    assert len(page_requests) == -(-len(expected) // 100)
    assert "search=report_date:[20190101+TO+20191231]" in server.requests[0]
    assert sleeps == []


def test_no_matches_is_an_empty_result_not_an_error(server):
    client, _ = _client(server)
    assert client.fetch_enforcement(date(1990, 1, 1), date(1990, 1, 2))["results"] == []


def test_windows_beyond_the_skip_cap_are_split_by_date(server, monkeypatch):
    monkeypatch.setattr(openfda, "MAX_SKIP", 150)  # pretend the cap is small so real pages exceed it
    client, _ = _client(server)
    document = client.fetch_enforcement(date(2019, 1, 1), date(2019, 12, 31))
    expected = _window("20190101", "20191231")
    assert sorted(r["recall_number"] for r in document["results"]) == sorted(r["recall_number"] for r in expected)
    skips = [int(p.split("skip=")[1].split("&")[0]) for p in server.requests if "skip=" in p]
    assert max(skips) <= 150
    assert len({p.split("search=")[1].split("&")[0] for p in server.requests}) > 1  # more than one date window


def test_retries_429_and_5xx_with_backoff_and_jitter_honouring_retry_after(server):
    server.failures = [
        (429, {"error": {"code": "TOO_MANY_REQUESTS", "message": "slow down"}}, {"Retry-After": "3"}),
        (503, {"error": {"message": "unavailable"}}, {}),
        (500, {"error": {"message": "boom"}}, {}),
    ]
    client, sleeps = _client(server, base_delay=0.5)
    page = client.get(openfda.ENFORCEMENT, {"limit": 5, "skip": 0})
    assert len(page["results"]) == 5
    assert len(sleeps) == 3
    assert sleeps[0] >= 3  # Retry-After wins over a shorter backoff
    assert 0.5 <= sleeps[1] <= 1.0 and 1.0 <= sleeps[2] <= 2.0  # exponential, jittered within [d/2, d]


def test_gives_up_after_the_attempts_with_a_clear_error(server):
    server.failures = [(502, {"error": {"message": "bad gateway"}}, {})] * 3
    client, sleeps = _client(server, attempts=3)
    with pytest.raises(OpenFDAError, match="still failing after 3 attempts.*HTTP 502"):
        client.get(openfda.ENFORCEMENT, {"limit": 1})
    assert len(sleeps) == 2


def test_other_errors_fail_at_once_naming_the_api_message(server):
    server.failures = [(400, {"error": {"code": "BAD_REQUEST", "message": "Invalid search syntax"}}, {})]
    client, sleeps = _client(server)
    with pytest.raises(OpenFDAError, match="HTTP 400 BAD_REQUEST Invalid search syntax"):
        client.get(openfda.ENFORCEMENT, {"search": "report_date:[x"})
    assert sleeps == [] and len(server.requests) == 1


def test_timeouts_are_retried(server):
    server.delay = 0.5
    client = OpenFDAClient(base_url=server.url, api_key="", timeout=0.1, attempts=2, sleep=lambda s: None)
    with pytest.raises(OpenFDAError, match="still failing after 2 attempts"):
        client.get(openfda.ENFORCEMENT, {"limit": 1})
    assert len(server.requests) == 2


def test_api_key_is_sent_but_never_shown(server):
    server.failures = [(403, {"error": {"code": "API_KEY_INVALID", "message": "bad key"}}, {})]
    client = OpenFDAClient(base_url=server.url, api_key="s3cret-key", timeout=2, sleep=lambda s: None)
    with pytest.raises(OpenFDAError) as info:
        client.get(openfda.ENFORCEMENT, {"limit": 1})
    assert "api_key=s3cret-key" in server.requests[0]
    assert "s3cret-key" not in str(info.value)


def test_page_size_is_capped_at_openfdas_limit():
    with pytest.raises(ValueError, match="1000"):
        OpenFDAClient(base_url="http://127.0.0.1:9", page_size=1001)


@pytest.mark.django_db(transaction=True)
def test_fetch_archive_ingest_then_reingest_the_archived_snapshot(server, settings, tmp_path, hashing_embeddings):
    from django.core.management import call_command

    from recalls.services import ingest_from_api, ingest_incremental

    settings.UNSAY_SNAPSHOT_DIR = tmp_path
    settings.UNSAY_S3_BUCKET = ""
    client, _ = _client(server)
    run = ingest_from_api(date(2020, 6, 1), date(2020, 6, 30), client=client, trigger="test")
    expected = _window("20200601", "20200630")
    assert run.status == IngestRun.Status.SUCCEEDED and run.fetched == len(expected) > 0
    assert run.source == IngestRun.Source.API and run.new_facts > 0
    snapshot = Path(run.snapshot_location)
    assert snapshot.is_file() and tmp_path in snapshot.parents
    archived = json.loads(snapshot.read_text())
    assert [r["recall_number"] for r in archived["results"]] == [
        r["recall_number"] for r in sorted(expected, key=lambda r: (r["report_date"], r["recall_number"]))]
    call_command("ingest_recalls", "--file", str(snapshot), "--no-progress")
    again = IngestRun.objects.latest("id")
    assert (again.new_facts, again.new_versions, again.embedding_calls) == (0, 0, 0)
    # The weekly task's window starts at the end of the last successful API run, with an overlap.
    server.requests.clear()
    incremental = ingest_incremental(client=client, today=date(2020, 7, 10))
    assert incremental.since == date(2020, 6, 16) and incremental.until == date(2020, 7, 10)
    assert "search=report_date:[20200616+TO+20200710]" in server.requests[0]
    # Also every recall terminated in the window and every one still Ongoing (their status can change
    # long after their report_date).
    assert any("termination_date:[20200616+TO+20200710]" in p for p in server.requests)
    assert any('report_date:[20040101+TO+20200710]+AND+status:"Ongoing"' in p for p in server.requests)
    expected = _incremental_expected("20200616", "20200710")
    assert incremental.fetched == len(expected)
    archived = json.loads(Path(incremental.snapshot_location).read_text())["results"]
    assert {json.dumps(r, sort_keys=True) for r in archived} == expected


@pytest.mark.django_db(transaction=True)
def test_celery_task_runs_the_incremental_ingest(server, settings, tmp_path, hashing_embeddings):
    from recalls.tasks import ingest_openfda

    settings.UNSAY_SNAPSHOT_DIR = tmp_path
    settings.UNSAY_S3_BUCKET = ""
    settings.UNSAY_OPENFDA_BASE_URL = server.url
    settings.UNSAY_OPENFDA_API_KEY = ""
    IngestRun.objects.create(source=IngestRun.Source.API, status=IngestRun.Status.SUCCEEDED,
                             started="2026-01-01T00:00Z", since=date(2023, 6, 1), until=date(2023, 7, 15))
    result = ingest_openfda.apply().get()
    run = IngestRun.objects.get(pk=result["run"])
    assert run.trigger == "celery" and run.since == date(2023, 7, 1) and run.status == "succeeded"
    assert result["fetched"] == run.fetched == len(_incremental_expected("20230701", date.today().strftime("%Y%m%d")))


def test_snapshots_go_to_s3_when_a_bucket_is_set(settings):
    import boto3

    settings.UNSAY_S3_BUCKET = "unsay-snapshots"
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
    document = {"meta": {}, "results": RECORDS[:3]}
    body = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    with Stubber(client) as stub:
        stub.add_response("put_object", {}, {"Bucket": "unsay-snapshots", "Key": _AnyKey(), "Body": body,
                                             "ContentType": "application/json"})
        stub.add_response("get_object", {"Body": io.BytesIO(body)},
                          {"Bucket": "unsay-snapshots", "Key": _AnyKey()})
        archive.set_s3_client(client)
        try:
            location = archive.archive_snapshot(document, kind="enforcement", label="20260101-20260107")
            assert location.startswith("s3://unsay-snapshots/openfda/enforcement/")
            assert location.endswith("-20260101-20260107.json")
            assert json.loads(archive.read_location(location)) == document
        finally:
            archive.set_s3_client(None)
        stub.assert_no_pending_responses()


class _AnyKey(str):
    """Matches any snapshot key under openfda/ (Stubber compares expected params with ==)."""

    def __new__(cls):
        return super().__new__(cls, "openfda/")

    def __eq__(self, other):
        return isinstance(other, str) and other.startswith("openfda/")

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


@pytest.mark.django_db(transaction=True)
def test_labels_are_fetched_by_effective_time_and_ingested(settings, tmp_path, hashing_embeddings):
    from recalls.services import ingest_from_api

    settings.UNSAY_SNAPSHOT_DIR = tmp_path
    settings.UNSAY_S3_BUCKET = ""
    labels = json.loads((FIXTURES / "drug-label-sample.json").read_text())["results"]
    replay = ReplayServer(labels)
    try:
        client = OpenFDAClient(base_url=replay.url, api_key="", timeout=2, sleep=lambda s: None)
        run = ingest_from_api(date(2016, 1, 1), date(2016, 12, 31), labels=True, client=client)
    finally:
        replay.close()
    assert "/drug/label.json?" in replay.requests[0] and "effective_time:[20160101+TO+20161231]" in replay.requests[0]
    assert run.kind == IngestRun.Kind.LABEL and run.fetched == 1 and run.new_facts == 2  # HUMIRA only (2016)
    assert run.quarantined == 0
