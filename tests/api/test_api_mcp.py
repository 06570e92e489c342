"""MCP over the SDK's own client, against real data, over stdio (`manage.py mcp`) and streamable
HTTP (uvicorn serving unsay_site.asgi): ask -> escalate the real recall D-0326-2019 (recalls.services)
-> sweep -> check says not standing and names the change -> get_decision shows the correction;
replay; and the refusals: no key, revoked key, another client's decision, a failure's neutral text."""

import asyncio
import json
import socket
import subprocess
import sys
import time
import zipfile
from datetime import UTC, datetime

import pytest
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ask.keys import issue_key, revoke_keys
from ask.models import ApiClient, ApiKey
from corrections.sweep.run import sweep
from demo.escalation import escalate
from memory.models import Decision
from tests.factories import FIXTURES, make_patient
from tests.procs import PROJECT_DIR, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)

RECALL, LOT = "D-0326-2019", "3069020"  # real: valsartan, Class II, Ongoing (openFDA 2021 file)


@pytest.fixture
def real_recall(tmp_path, hashing_embeddings, monkeypatch):
    """The real D-0326-2019 record(s) ingested; a synthetic patient of North dispensed its lot."""
    from django.core.management import call_command

    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)  # the test sweeps explicitly
    with zipfile.ZipFile(FIXTURES / "drug-enforcement-2021-04-28.json.zip") as archive:
        data = json.loads(archive.read(archive.namelist()[0]))
    records = [r for r in data["results"] if r.get("recall_number") == RECALL]
    assert records, "the real recall is in the fixture file"
    path = tmp_path / "d-0326-2019.json"
    path.write_text(json.dumps({"meta": data.get("meta", {}), "results": records}))
    call_command("ingest_recalls", "--file", str(path), "--no-progress", stdout=open("/dev/null", "w"))
    north, south = ApiClient.objects.create(name="North"), ApiClient.objects.create(name="South")
    patient = make_patient("SYN-MCP-1", [{"drug": "valsartan", "lot": LOT, "quantity": 30}],
                           name="Synthetic MCP patient", email="", phone="", client=north,
                           dispensed_at=datetime(2019, 1, 5, 12, tzinfo=UTC), through_service=True)
    _, secret = issue_key(north, kind=ApiKey.Kind.PATIENT, patient=patient, name="mcp test")
    _, south_secret = issue_key(south, name="other client")
    return {"secret": secret, "south": south_secret, "patient": patient}


def structured(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


async def story(call, after_ask) -> dict:
    """The session every transport must carry: ask, (escalate + sweep), check, get_decision, replay."""
    tools = await call.list_tools()
    assert {t.name for t in tools.tools} == {"ask", "check", "get_decision", "replay"}
    asked = structured(await call.call_tool("ask", {"question": "Is my valsartan safe?"}))
    assert asked["verdict"] == "caution" and asked["patient"] == "SYN-MCP-1"
    assert any(r["load_bearing"] and r["fact_key"] == f"recall:{RECALL}:lot:{LOT}" for r in asked["reads"])
    before = structured(await call.call_tool("check", {"decision_ids": [asked["id"]]}))["results"][0]
    assert before["standing"] is True and before["changes"] == [], before

    await asyncio.to_thread(after_ask)  # escalate the real recall to Class I and sweep

    after = structured(await call.call_tool("check", {"decision_ids": [asked["id"]]}))["results"][0]
    assert after["standing"] is False and after["state"] == "superseded"
    assert after["current_verdict"] == "stop" and after["current"]["status"] == "standing"
    change = next(c for c in after["changes"] if c["kind"] == "retracted_read")
    assert change["read"]["fact_key"] == f"recall:{RECALL}:lot:{LOT}" and change["read"]["version"] == 1
    assert change["now"]["version"] == 2 and "Class I" in change["now"]["statement"]

    shown = structured(await call.call_tool("get_decision", {"decision_id": asked["id"]}))
    assert shown["status"] == "superseded" and shown["superseded_by"]["verdict"] == "stop"
    correction = shown["corrections"][0]
    assert (correction["old_verdict"], correction["new_verdict"], correction["status"]) == ("caution", "stop", "draft")
    assert correction["changed_fact"]["version"] == 2 and correction["previous_fact"]["version"] == 1
    assert correction["text"] is None  # a draft is the pharmacist's until approved

    then = structured(await call.call_tool("replay", {"decision_id": asked["id"]}))
    assert {(b["fact_key"], b["version"]) for b in then["believed"]} >= {(f"recall:{RECALL}:lot:{LOT}", 1)}
    return asked


def escalate_and_sweep():
    from django.db import connection

    escalate(RECALL, "Class I", by="test")
    report = sweep()
    connection.close()
    assert report.corrected >= 1


def stdio_params(secret: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["manage.py", "mcp"], cwd=str(PROJECT_DIR),
                                 env=subprocess_env(UNSAY_MCP_API_KEY=secret))


def test_mcp_over_stdio_ask_escalate_check_get_decision(real_recall):
    async def run():
        async with Client(stdio_params(real_recall["secret"])) as client:
            asked = await story(client, escalate_and_sweep)
            # Another client's key can't see it; an unknown id reads the same.
            unknown = await client.call_tool("get_decision", {"decision_id": "00000000-0000-0000-0000-000000000000"})
            assert unknown.is_error and "No such resource" in unknown.content[0].text
            bad_time = await client.call_tool("replay", {"decision_id": asked["id"], "at": "2999-01-01T00:00:00Z"})
            assert bad_time.is_error and "future" in bad_time.content[0].text
        async with Client(stdio_params(real_recall["south"])) as client:
            other = await client.call_tool("get_decision", {"decision_id": asked["id"]})
            assert other.is_error and "No such resource" in other.content[0].text
            assert "caution" not in other.content[0].text

    asyncio.run(run())


def test_mcp_stdio_refuses_to_start_without_an_active_key(real_recall):
    revoke_keys(ApiKey.objects.filter(name="mcp test"))
    done = subprocess.run([sys.executable, "manage.py", "mcp"], cwd=PROJECT_DIR, capture_output=True, text=True,
                          env=subprocess_env(UNSAY_MCP_API_KEY=real_recall["secret"]), timeout=120, input="")
    assert done.returncode != 0 and "not an active API key" in done.stderr and done.stdout == ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def asgi_server():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "unsay_site.asgi:application", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], cwd=PROJECT_DIR, env=subprocess_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"uvicorn exited: {proc.stderr.read()}")
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


async def http_session(url: str, secret: str | None, body):
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)


def test_mcp_over_streamable_http_ask_escalate_check_get_decision(real_recall, asgi_server):
    asked = asyncio.run(http_session(asgi_server, real_recall["secret"],
                                     lambda session: story(session, escalate_and_sweep)))

    async def refusals(session):
        return await session.call_tool("get_decision", {"decision_id": asked["id"]})

    for secret in (None, "usk_not-a-key", real_recall["south"]):
        refused = asyncio.run(http_session(asgi_server, secret, refusals))
        assert refused.is_error and "caution" not in refused.content[0].text

    neighbour = make_patient("SYN-MCP-2", name="Synthetic MCP neighbour", email="", phone="",
                             client=ApiClient.objects.get(name="North"))
    decisions = Decision.objects.count()

    async def asks_for_others(session):
        return [await session.call_tool("ask", {"question": "Is my valsartan safe?", "patient": ref})
                for ref in ("SYN-MCP-2", str(neighbour.public_id), "SYN-NOBODY")] + [
            await session.call_tool("ask", {"question": "safe?\u0000"}),
            await session.call_tool("ask", {"question": "x" * 1001})]

    for refused in asyncio.run(http_session(asgi_server, real_recall["secret"], asks_for_others)):
        assert refused.is_error and "Error executing tool ask" in refused.content[0].text
    assert Decision.objects.count() == decisions
    # Oversized and wrong-typed bodies never reach a tool.
    import urllib.error
    import urllib.request
    for body, content_type, status in ((b"{" + b" " * 300_000 + b"}", "application/json", 413),
                                       (b"ask", "text/plain", 400)):
        request = urllib.request.Request(f"{asgi_server}/mcp", data=body, method="POST", headers={
            "Content-Type": content_type, "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {real_recall['secret']}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request)
        assert refused.value.code == status
    assert Decision.objects.count() == decisions
    revoke_keys(ApiKey.objects.filter(name="mcp test"))
    revoked = asyncio.run(http_session(asgi_server, real_recall["secret"], refusals))
    assert revoked.is_error and "Missing, unknown or revoked API key" in revoked.content[0].text
    # The Django side of the same ASGI app still answers.
    with urllib.request.urlopen(f"{asgi_server}/api/v1/openapi.json") as response:
        assert json.load(response)["info"]["title"] == "Unsay API"
    assert Decision.objects.filter(patient_id=real_recall["patient"].pk).count() == 2  # the ask and its re-decision


def test_a_tool_failure_answers_a_neutral_sentence_and_logs_the_detail(real_recall, monkeypatch, caplog):
    from api import mcp_server, services

    def broken(*args, **kwargs):
        raise RuntimeError('connection to server at "db.internal" (10.0.0.5), user "unsay" failed')

    monkeypatch.setattr(services, "check", broken)
    monkeypatch.setattr(mcp_server.settings, "UNSAY_MCP_API_KEY", real_recall["secret"], raising=False)

    async def run():
        async with Client(mcp_server.server) as client:  # in-process: no headers, so the stdio identity
            return await client.call_tool("check", {"decision_ids": ["00000000-0000-0000-0000-000000000000"]})

    result = asyncio.run(run())
    assert result.is_error and result.content[0].text.endswith(mcp_server.NEUTRAL_FAILURE)
    assert "db.internal" in caplog.text and "db.internal" not in result.content[0].text
