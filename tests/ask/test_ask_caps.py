"""Model-call caps counted in the database (real concurrent processes), cap fallback and the reuse window."""

import time

import boto3
import pytest
from botocore.stub import ANY, Stubber
from django.test import override_settings

from ask import services as ask_module
from ask.bedrock import TOOL_NAME, BedrockReasoner
from ask.models import ApiClient, UsageCounter
from ask.services import ask, reserve_model_call, usage_report
from memory.fact_writes import assert_claim
from tests.factories import make_patient, recall_claim
from tests.procs import start_python

pytestmark = pytest.mark.django_db(transaction=True)

CONSUMER = """
import sys, time
from types import SimpleNamespace
from ask.services import reserve_model_call
start, attempts, client_id = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
time.sleep(max(0.0, start - time.time()))
client = SimpleNamespace(pk=client_id)
granted = sum(reserve_model_call(client)[0] for _ in range(attempts))
print(granted)
"""


def run_consumers(n, attempts, client_ids, **env):
    start = time.time() + 4.0  # all processes set up Django first, then race
    procs = []
    for i in range(n):
        argv = ["x", str(start), str(attempts), str(client_ids[i % len(client_ids)])]
        code = f"import sys; sys.argv = {argv!r}\n" + CONSUMER
        procs.append(start_python(code, **env))
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(int(out.strip().splitlines()[-1]))
    return results


@pytest.mark.slow
def test_daily_cap_grants_exactly_the_cap_to_concurrent_processes():
    granted = run_consumers(4, 12, [1, 2, 3, 4], UNSAY_MODEL_DAILY_CAP=17, UNSAY_MODEL_HOURLY_CAP_PER_CLIENT=1000)
    assert sum(granted) == 17
    assert UsageCounter.objects.get(scope="daily").n == 17


@pytest.mark.slow
def test_hourly_per_client_cap_is_exact_and_does_not_use_up_the_daily_allowance():
    granted = run_consumers(4, 10, [7, 7, 8, 8], UNSAY_MODEL_DAILY_CAP=1000, UNSAY_MODEL_HOURLY_CAP_PER_CLIENT=6)
    assert sum(granted) == 12  # 6 for client 7, 6 for client 8
    counts = dict(UsageCounter.objects.values_list("scope", "n"))
    assert counts == {"daily": 12, "client:7": 6, "client:8": 6}


@override_settings(UNSAY_MODEL_DAILY_CAP=2, UNSAY_MODEL_HOURLY_CAP_PER_CLIENT=1)
def test_reserve_and_usage_report_in_process():
    a, b = ApiClient.objects.create(name="A"), ApiClient.objects.create(name="B")
    assert reserve_model_call(a) == (True, "")
    assert reserve_model_call(a) == (False, "hourly cap for this client")
    assert reserve_model_call(b) == (True, "")
    assert reserve_model_call(b) == (False, "daily cap")
    report = usage_report()
    assert report["daily"] == {"window_start": report["daily"]["window_start"], "used": 2, "cap": 2}
    assert report["hourly_per_client"]["used"] == {f"client:{a.pk}": 1, f"client:{b.pk}": 1}


@pytest.fixture
def bedrock(monkeypatch):
    client = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    stubber = Stubber(client)
    stubber.activate()
    real = ask_module.get_reasoner
    monkeypatch.setattr(ask_module, "get_reasoner",
                        lambda name=None: real(name) if name else BedrockReasoner(client=client, model_id="m"))
    yield stubber
    stubber.deactivate()


@pytest.fixture
def patient(hashing_embeddings):
    hit = assert_claim(recall_claim("D-0315-2019", "3061169")).fact
    p = make_patient("SYN-C1", [("valsartan", "3061169")], name="Synthetic C", email="", phone="")
    p.hit = hit
    return p


def answer(fact_id):
    return {"output": {"message": {"role": "assistant", "content": [{"toolUse": {
        "toolUseId": "t1", "name": TOOL_NAME,
        "input": {"verdict": "caution", "answer": "Recalled lot 3061169.", "cited_fact_ids": [fact_id]}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1}}


@override_settings(UNSAY_ASK_REUSE_SECONDS=300)
def test_identical_question_and_inputs_reuse_the_decision_without_a_second_model_call(bedrock, patient):
    bedrock.add_response("converse", answer(patient.hit.id), {"modelId": "m", "system": ANY, "messages": ANY,
                                                              "toolConfig": ANY, "inferenceConfig": ANY})
    first = ask(patient, "Is my valsartan safe?")
    again = ask(patient, "  is my VALSARTAN safe? ")  # only case/whitespace differ: same fingerprint
    bedrock.assert_no_pending_responses()  # exactly one converse call was made
    assert again.pk == first.pk and first.reasoner == "bedrock:m"
    assert UsageCounter.objects.get(scope="daily").n == 1

    assert_claim(recall_claim("D-0315-2019", "3061169", status="Terminated"))  # inputs change: no reuse
    third = ask(patient, "Is my valsartan safe?", client=None)
    assert third.pk != first.pk and third.reasoner.startswith("rules/1 (bedrock failed closed")  # no stub left


@override_settings(UNSAY_MODEL_DAILY_CAP=0)
def test_when_the_cap_is_hit_the_rules_answer_is_given_and_marked(bedrock, patient):
    decision = ask(patient, "Is my valsartan safe?")
    assert decision.reasoner == "rules/1 (model cap reached: daily cap)"
    assert decision.verdict == "caution" and decision.reads.filter(load_bearing=True, fact=patient.hit).exists()


@override_settings(UNSAY_MODEL_DAILY_CAP=5)
def test_health_shows_model_usage_against_the_caps(client, django_user_model):
    reserve_model_call(ApiClient.objects.create(name="A"))
    client.force_login(django_user_model.objects.create_user("ops-staff", is_staff=True))  # staff-only /status
    usage = client.get("/status").json()["model_usage"]
    assert usage["daily"]["used"] == 1 and usage["daily"]["cap"] == 5


@override_settings(UNSAY_MODEL_DAILY_CAP=0)
def test_re_decisions_outside_ask_are_capped_too(bedrock, patient):
    """The sweep re-decides through decide(); a model call there counts against the same caps."""
    from ask.services import decide

    outcome = decide(patient, "Is my valsartan safe?")
    assert outcome.reasoner == "rules/1 (model cap reached: daily cap)" and outcome.verdict == "caution"
    bedrock.assert_no_pending_responses()  # no converse call was made


@override_settings(UNSAY_MODEL_DAILY_CAP=10)
def test_a_model_re_decision_is_counted(bedrock, patient):
    from ask.services import decide

    bedrock.add_response("converse", answer(patient.hit.id), {"modelId": "m", "system": ANY, "messages": ANY,
                                                              "toolConfig": ANY, "inferenceConfig": ANY})
    outcome = decide(patient, "Is my valsartan safe?")
    assert outcome.reasoner == "bedrock:m"
    assert UsageCounter.objects.get(scope="daily").n == 1
    assert UsageCounter.objects.get(scope="client:internal").n == 1
