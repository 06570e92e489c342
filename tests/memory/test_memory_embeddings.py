"""Embedding providers: Bedrock Titan V2 request/response (botocore Stubber, no network), the real
local MiniLM model loaded offline, the test-only hashing provider, and dimension/norm checks."""

import io
import json
import math

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from memory import embeddings
from memory.embeddings import BedrockTitan, EmbeddingError, EmbeddingProvider, HashingEmbedding, build_provider
from tests.procs import manage
from unsay_site import checks


def unit(n, hot=0):
    return [1.0 if i == hot else 0.0 for i in range(n)]


def titan_response(vector):
    payload = json.dumps({"embedding": vector, "inputTextTokenCount": 5}).encode()
    return {"body": StreamingBody(io.BytesIO(payload), len(payload)), "contentType": "application/json"}


def stubbed_titan():
    client = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    return client, Stubber(client)


@override_settings(UNSAY_EMBEDDING_DIM=1024)
def test_bedrock_titan_sends_one_normalised_1024_dim_request_per_text():
    client, stubber = stubbed_titan()
    for i, text in enumerate(["valsartan recall", "metformin NDMA"]):
        stubber.add_response("invoke_model", titan_response(unit(1024, hot=i)), expected_params={
            "modelId": "amazon.titan-embed-text-v2:0",
            "body": json.dumps({"inputText": text, "dimensions": 1024, "normalize": True}),
            "contentType": "application/json", "accept": "application/json"})
    provider = BedrockTitan(client=client)
    with stubber:
        vectors = provider.embed(["valsartan recall", "metformin NDMA"])
    stubber.assert_no_pending_responses()
    assert [v.index(1.0) for v in vectors] == [0, 1] and all(len(v) == 1024 for v in vectors)
    assert (provider.calls, provider.texts, provider.name) == (1, 2, "bedrock:amazon.titan-embed-text-v2:0")


@override_settings(UNSAY_EMBEDDING_DIM=1024)
def test_bedrock_answers_of_the_wrong_size_or_norm_are_refused():
    client, stubber = stubbed_titan()
    stubber.add_response("invoke_model", titan_response([0.5] * 256))
    stubber.add_response("invoke_model", titan_response([0.5] * 1024))
    provider = BedrockTitan(client=client)
    with stubber:
        with pytest.raises(EmbeddingError, match="256 dimensions, expected 1024"):
            provider.embed_one("a")
        with pytest.raises(EmbeddingError, match="unit norm is required"):
            provider.embed_one("b")


@override_settings(UNSAY_EMBEDDING_DIM=1024)
def test_bedrock_service_errors_surface_not_silently_fall_back():
    client, stubber = stubbed_titan()
    stubber.add_client_error("invoke_model", service_error_code="ThrottlingException", http_status_code=429)
    with stubber, pytest.raises(client.exceptions.ThrottlingException):
        BedrockTitan(client=client).embed_one("valsartan")


@pytest.mark.slow
def test_local_minilm_loads_offline_and_ranks_similar_sentences_higher(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    provider = build_provider("local")
    a, b, c = provider.embed([
        "Valsartan tablets recalled because of NDMA impurity",
        "Recall of valsartan due to nitrosamine contamination",
        "The weather in Lisbon is sunny this weekend",
    ])
    for v in (a, b, c):
        assert len(v) == 384
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, abs_tol=1e-4)

    def cosine(x, y):
        return sum(p * q for p, q in zip(x, y, strict=True))

    assert cosine(a, b) > 0.5 > cosine(a, c)
    assert provider.name == "local:all-MiniLM-L6-v2"


def test_hashing_is_refused_unless_fake_embeddings_are_allowed():
    with override_settings(UNSAY_ALLOW_FAKE_EMBEDDINGS=False):
        with pytest.raises(ImproperlyConfigured, match="UNSAY_ALLOW_FAKE_EMBEDDINGS=1"):
            build_provider("hashing")
        assert [e.id for e in checks.check_embeddings(None)] == ["unsay.E010"]
    assert isinstance(build_provider("hashing"), HashingEmbedding)
    with pytest.raises(ImproperlyConfigured, match="not one of"):
        build_provider("word2vec")


def test_a_provider_whose_size_differs_from_the_setting_stops_start_up():
    with pytest.raises(ImproperlyConfigured, match="UNSAY_EMBEDDING_DIM=384 does not match .* 1024 dimensions"):
        build_provider("bedrock")
    with override_settings(UNSAY_EMBEDDINGS="local", UNSAY_EMBEDDING_DIM=1024):
        assert [e.id for e in checks.check_embeddings(None)] == ["unsay.E011"]


def test_vectors_must_be_unit_norm_and_of_the_right_count():
    class Broken(EmbeddingProvider):
        name, dimension = "broken", 3

        def __init__(self, answer):
            super().__init__()
            self.answer = answer

        def _embed(self, texts):
            return self.answer

    with pytest.raises(EmbeddingError, match="norm 2.0000"):
        Broken([[2.0, 0.0, 0.0]]).embed(["x"])
    with pytest.raises(EmbeddingError, match="zero or non-finite"):
        Broken([[0.0, 0.0, 0.0]]).embed(["x"])
    with pytest.raises(EmbeddingError, match="2 vectors for 1 texts"):
        Broken([unit(3), unit(3)]).embed(["x"])
    assert Broken([unit(3)]).embed([]) == []


def test_hashing_vectors_are_deterministic_unit_norm_and_lexical():
    provider = HashingEmbedding(384)
    a, a2, b = provider.embed(["valsartan lot A1", "valsartan lot A1", "metformin"])
    assert a == a2 and math.isclose(sum(x * x for x in a), 1.0, abs_tol=1e-6)
    assert sum(x * y for x, y in zip(a, b, strict=True)) < 0.5


@pytest.mark.django_db
def test_a_database_column_of_another_size_stops_the_provider_and_the_check(settings):
    assert embeddings.column_dimension() == 384
    with pytest.raises(ImproperlyConfigured, match=r"512-dimensional vectors but .* is vector\(384\)"):
        embeddings.check_column_matches(512)
    settings.UNSAY_EMBEDDING_DIM = 512
    errors = checks.check_embedding_column(None, databases=["default"])
    assert [e.id for e in errors] == ["unsay.E012"] and "vector(384)" in errors[0].msg


@pytest.mark.django_db
def test_manage_py_check_fails_loudly_on_a_dimension_mismatch():
    result = manage("check", "--database", "default", UNSAY_EMBEDDING_DIM="512")
    assert result.returncode != 0
    assert "UNSAY_EMBEDDING_DIM=512 but memory_fact.embedding is vector(384)" in result.stderr
