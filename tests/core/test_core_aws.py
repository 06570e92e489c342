"""core.aws: one boto3 client per (service, region), the configured region, the SDK's endpoint overrides,
and a Stubber on the shared client reaching every caller. No network."""

import io
import json

import pytest
from botocore.stub import Stubber

from ask.bedrock import BedrockReasoner
from core import aws
from memory.embeddings import BedrockTitan
from recalls import archive


@pytest.fixture(autouse=True)
def fresh_clients(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    aws.forget()
    yield
    aws.forget()


def test_one_client_per_service_and_region(settings):
    settings.UNSAY_AWS_REGION = "eu-west-1"
    s3 = aws.client("s3")
    assert aws.client("s3") is s3 and s3.meta.region_name == "eu-west-1"
    assert aws.client("s3", "us-west-2") is not s3 and aws.client("s3", "us-west-2").meta.region_name == "us-west-2"
    assert aws.client("bedrock-runtime") is not s3


def test_model_calls_fail_fast_other_services_keep_sdk_defaults():
    runtime = aws.client("bedrock-runtime").meta.config
    assert (runtime.connect_timeout, runtime.read_timeout, runtime.retries["total_max_attempts"]) == (5, 30, 3)
    assert aws.client("s3").meta.config.read_timeout == 60


def test_endpoint_override_from_the_sdk_variables(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000")
    assert aws.client("s3").meta.endpoint_url == "http://127.0.0.1:9000"


def test_a_stubber_on_the_shared_client_serves_archive_and_embeddings(settings):
    settings.UNSAY_S3_BUCKET = "snapshots"
    with Stubber(aws.client("s3")) as s3:
        s3.add_response("get_object", {"Body": io.BytesIO(b'{"results": []}')},
                        {"Bucket": "snapshots", "Key": "a.json"})
        assert archive.read_location("s3://snapshots/a.json") == b'{"results": []}'
    vector = [0.0] * 1024
    with Stubber(aws.client("bedrock-runtime")) as runtime:
        runtime.add_response("invoke_model", {"body": io.BytesIO(json.dumps({"embedding": vector}).encode()),
                                              "contentType": "application/json"})
        assert BedrockTitan()._embed(["metformin"]) == [vector]


def test_use_client_swaps_and_none_restores():
    fake = object()
    aws.use_client("s3", fake)
    assert archive.s3_client() is fake
    archive.set_s3_client(None)
    assert archive.s3_client() is not fake


def test_a_class_names_its_service_once_and_an_instance_may_bring_its_own_client():
    own = object()
    assert BedrockReasoner(client=own).client is own and BedrockTitan(client=own).client is own
    reasoner, titan = BedrockReasoner(), BedrockTitan()
    assert reasoner.client is aws.client("bedrock-runtime") is titan.client  # made on first use, shared
    swapped = object()
    aws.use_client("bedrock-runtime", swapped)  # reaches instances made before the swap
    assert reasoner.client is swapped and titan.client is swapped
