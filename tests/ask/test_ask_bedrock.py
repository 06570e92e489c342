"""Bedrock Converse handling with botocore's Stubber: no network. Facts come from real openFDA records."""

import json
import logging

import boto3
import pytest
from botocore.stub import ANY, Stubber

from ask.bedrock import TOOL_NAME, BedrockReasoner
from ask.services import decide
from memory.fact_writes import assert_claim
from tests.factories import make_patient, recall_claim

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "anthropic.claude-test"


@pytest.fixture
def runtime():
    client = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def valsartan_patient(hashing_embeddings):
    hit = assert_claim(recall_claim("D-0315-2019", "3061169")).fact
    other = assert_claim(recall_claim("D-0324-2019", "3063780")).fact
    patient = make_patient("SYN-B1", [("valsartan", "3061169")], name="Synthetic B", email="", phone="")
    return patient, hit, other


def tool_response(payload):
    return {
        "output": {"message": {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "tooluse_1", "name": TOOL_NAME, "input": payload}}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120},
        "metrics": {"latencyMs": 10},
    }


EXPECTED = {"modelId": MODEL, "system": ANY, "messages": ANY, "toolConfig": ANY, "inferenceConfig": ANY}


def test_a_valid_tool_answer_is_used_with_its_grounded_citations(runtime, valsartan_patient):
    client, stubber = runtime
    patient, hit, other = valsartan_patient
    stubber.add_response("converse", tool_response(
        {"verdict": "caution", "answer": "Your lot 3061169 is in recall D-0315-2019; call your pharmacist.",
         "cited_fact_ids": [hit.id]}), EXPECTED)

    outcome = decide(patient, "Is my valsartan safe?", reasoner=BedrockReasoner(client=client, model_id=MODEL))

    assert outcome.verdict == "caution" and outcome.reasoner == f"bedrock:{MODEL}"
    assert outcome.answer.startswith("Your lot 3061169")
    assert outcome.load_bearing_ids == {hit.id}


def test_the_request_forces_the_tool_and_lists_the_retrieved_fact_ids(valsartan_patient):
    patient, hit, other = valsartan_patient
    from ask.services import build_context

    request = BedrockReasoner(client=object(), model_id=MODEL).request(build_context(patient, "safe?", "valsartan"))
    assert request["toolConfig"]["toolChoice"] == {"tool": {"name": TOOL_NAME}}
    schema = request["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]
    assert schema["required"] == ["verdict", "answer", "cited_fact_ids"]
    text = request["messages"][0]["content"][0]["text"]
    assert f'"id": {hit.id}' in text and f'"id": {other.id}' in text and "3061169" in text


def test_malformed_tool_input_fails_closed_to_the_rules(runtime, valsartan_patient):
    client, stubber = runtime
    patient, hit, _ = valsartan_patient
    stubber.add_response("converse", tool_response('{"verdict": "safe", "answer": '), EXPECTED)

    outcome = decide(patient, "Is my valsartan safe?", reasoner=BedrockReasoner(client=client, model_id=MODEL))

    assert outcome.verdict == "caution"
    assert outcome.reasoner.startswith("rules/1 (bedrock failed closed: tool input is not valid JSON")
    assert outcome.load_bearing_ids == {hit.id} and "D-0315-2019" in outcome.answer


def test_a_citation_of_an_unseen_fact_id_is_dropped_and_logged(runtime, valsartan_patient, caplog):
    client, stubber = runtime
    patient, hit, _ = valsartan_patient
    stubber.add_response("converse", tool_response(
        {"verdict": "caution", "answer": "Lot 3061169 is recalled (D-0315-2019).", "cited_fact_ids": [hit.id, 987654]}),
        EXPECTED)

    with caplog.at_level(logging.WARNING, logger="ask.bedrock"):
        outcome = decide(patient, "Is my valsartan safe?", reasoner=BedrockReasoner(client=client, model_id=MODEL))

    assert outcome.reasoner == f"bedrock:{MODEL}" and outcome.load_bearing_ids == {hit.id}
    assert 987654 not in {r.fact.id for r in outcome.retrieved}
    assert any("987654" in rec.getMessage() for rec in caplog.records)


def test_only_unseen_citations_fail_closed(runtime, valsartan_patient):
    client, stubber = runtime
    patient, _, _ = valsartan_patient
    stubber.add_response("converse", tool_response(
        {"verdict": "safe", "answer": "Fine.", "cited_fact_ids": [987654]}), EXPECTED)
    outcome = decide(patient, "Is my valsartan safe?", reasoner=BedrockReasoner(client=client, model_id=MODEL))
    assert outcome.reasoner.startswith("rules/1 (bedrock failed closed: every cited fact id was unseen")
    assert outcome.verdict == "caution"


def test_throttling_fails_closed_never_raises(runtime, valsartan_patient):
    client, stubber = runtime
    patient, hit, _ = valsartan_patient
    stubber.add_client_error("converse", service_error_code="ThrottlingException", service_message="Too many requests",
                             http_status_code=429)

    outcome = decide(patient, "Is my valsartan safe?", reasoner=BedrockReasoner(client=client, model_id=MODEL))

    assert outcome.reasoner == "rules/1 (bedrock failed closed: ThrottlingException)"
    assert outcome.verdict == "caution" and hit.id in outcome.load_bearing_ids


def test_a_model_saying_safe_with_an_active_recall_on_their_lot_is_overridden(runtime, valsartan_patient):
    client, stubber = runtime
    patient, hit, _ = valsartan_patient
    stubber.add_response("converse", tool_response(
        {"verdict": "safe", "answer": "Nothing to worry about.", "cited_fact_ids": []}), EXPECTED)

    outcome = decide(patient, "Is my valsartan safe?", reasoner=BedrockReasoner(client=client, model_id=MODEL))

    assert (outcome.verdict, outcome.reasoner_verdict) == ("caution", "safe")
    assert outcome.reasoner == f"bedrock:{MODEL}" and hit.id in outcome.load_bearing_ids
    assert "Nothing to worry about" not in outcome.answer


@pytest.mark.parametrize("payload, why", [
    ({"verdict": "stop", "answer": "   ", "cited_fact_ids": []}, "answer: String should match pattern"),
    ({"verdict": "stop", "answer": "Stop.", "cited_fact_ids": [True]},
     "cited_fact_ids.0: Input should be a valid integer"),
    ({"verdict": "fine", "answer": "Fine.", "cited_fact_ids": []}, "verdict: Input should be"),
])
def test_the_reply_is_validated_by_the_same_model_that_gives_the_tool_schema(runtime, valsartan_patient, payload, why):
    from ask.bedrock import TOOL_SCHEMA, VerdictReply

    assert TOOL_SCHEMA == VerdictReply.model_json_schema() and TOOL_SCHEMA["required"] == [
        "verdict", "answer", "cited_fact_ids"]
    client, stubber = runtime
    patient, hit, _ = valsartan_patient
    stubber.add_response("converse", tool_response(json.dumps(payload)), EXPECTED)

    outcome = decide(patient, "Is my valsartan safe?", reasoner=BedrockReasoner(client=client, model_id=MODEL))

    assert outcome.verdict == "caution" and f"bedrock failed closed: {why}" in outcome.reasoner
