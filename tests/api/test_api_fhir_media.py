"""The FHIR endpoints answer in FHIR's media type and refuse with OperationOutcome (api/fhir_media.py,
docs/fhir.md): application/fhir+json by default and for `*/*`, application/json when that is what the client
accepts, `_format` over `Accept`, a 406 OperationOutcome for XML, HTML or another FHIR release; every refusal
on these endpoints an OperationOutcome (validated with fhir.resources), labelled with a type the client
accepts. The MedicationDispense POST takes `application/fhir+json` with its parameters, answers its receipt as
before, or an OperationOutcome (with the recall warning) to a client that asks for FHIR. The rest of API v1
keeps RFC 9457 problem details. Recall D-0326-2019 is real (openFDA); patients are synthetic."""

import json

import pytest
from fhir.resources.R4B.bundle import Bundle
from fhir.resources.R4B.operationoutcome import OperationOutcome

from ask.keys import issue_key
from ask.models import ApiClient
from memory.fact_writes import assert_claim
from patients.models import DispensingChange, DispensingRecord
from tests.factories import make_patient, recall_claim

pytestmark = pytest.mark.django_db(transaction=True)

FHIR, JSON = "application/fhir+json; charset=utf-8", "application/json; charset=utf-8"
SEARCH = "/api/v1/fhir/CommunicationRequest"


@pytest.fixture
def secret(db):
    client = ApiClient.objects.create(name="North")
    make_patient("SYN-FM-1", name="Synthetic FM", client=client)
    return issue_key(client)[1]


def fetch(client, secret, path=SEARCH, accept=None, **query):
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    if accept is not None:
        headers["Accept"] = accept
    return client.get(path, query, headers=headers)


def outcome(response, status, code) -> list[dict]:
    assert response.status_code == status, response.content
    OperationOutcome.model_validate(response.json())
    issues = response.json()["issue"]
    assert issues[0]["code"] == code and issues[0]["severity"] == "error"
    return issues


@pytest.mark.parametrize(("accept", "answered"), [
    (None, FHIR), ("", FHIR), ("*/*", FHIR), ("application/*", FHIR), ("application/fhir+json", FHIR),
    ("application/fhir+json; fhirVersion=4.0; charset=utf-8", FHIR), ("application/json+fhir", FHIR),
    ("application/json", JSON), ("application/xml, application/json;q=0.5", JSON),
    ("application/fhir+json;q=0, */*", JSON), ("application/json;q=0, */*", FHIR),
    ("application/json;q=0.9, application/fhir+json;q=0.8", JSON), ("text/html, */*;q=0.1", FHIR),
])
def test_a_read_answers_in_the_type_the_client_accepts(client, secret, accept, answered):
    response = fetch(client, secret, accept=accept)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == answered and response["Vary"] == "Accept"
    Bundle.model_validate(response.json())


@pytest.mark.parametrize("accept", ["application/xml", "application/fhir+xml", "text/html", "text/*",
                                    "application/fhir+json; fhirVersion=3.0", "application/json;q=0",
                                    "application/turtle, image/png"])
def test_what_cannot_be_served_is_a_406_operation_outcome(client, secret, accept):
    response = fetch(client, secret, accept=accept)
    issues = outcome(response, 406, "not-supported")
    assert response["Content-Type"] == FHIR  # nothing it accepts, so FHIR's own type
    assert "application/fhir+json or application/json" in issues[0]["diagnostics"]
    assert issues[0]["details"]["coding"] == [{"system": "urn:unsay:problem", "code": "not-acceptable"}]


@pytest.mark.parametrize(("fmt", "answered"), [
    ("json", FHIR), ("application/fhir+json", FHIR), ("application/fhir json", FHIR), ("application/json", JSON)])
def test_format_overrides_accept(client, secret, fmt, answered):
    response = fetch(client, secret, accept="application/xml", _format=fmt)
    assert response.status_code == 200 and response["Content-Type"] == answered


@pytest.mark.parametrize("fmt", ["xml", "application/fhir+xml", "html", "ttl", ""])
def test_a_format_we_do_not_serve_is_a_406(client, secret, fmt):
    outcome(fetch(client, secret, accept="application/fhir+json", _format=fmt), 406, "not-supported")


def test_refusals_on_fhir_endpoints_are_operation_outcomes_with_what_the_problem_says(client, secret):
    unauthenticated = fetch(client, None)
    issues = outcome(unauthenticated, 401, "login")
    assert unauthenticated["WWW-Authenticate"].startswith("Bearer") and unauthenticated["Content-Type"] == FHIR
    assert issues[0]["details"]["coding"][0]["code"] == "unauthenticated"
    # A refusal is never turned into a 406: with no acceptable type it is labelled application/fhir+json.
    assert fetch(client, None, accept="text/html")["Content-Type"] == FHIR
    missing = fetch(client, secret, f"{SEARCH}/00000000-0000-0000-0000-000000000000", accept="application/json")
    outcome(missing, 404, "not-found")
    assert missing["Content-Type"] == JSON  # labelled with what the client accepts
    issues = outcome(fetch(client, secret, status="bogus", _count="0"), 422, "invalid")
    assert any(issue["diagnostics"].startswith("_count: ") for issue in issues[1:])
    outcome(fetch(client, secret, "/api/v1/fhir/Patient/SYN-FM-1"), 404, "not-found")


def test_the_rest_of_the_api_keeps_problem_details(client, secret):
    response = fetch(client, secret, "/api/v1/decisions/00000000-0000-0000-0000-000000000000",
                     accept="application/fhir+json")
    assert response.status_code == 404 and response["Content-Type"] == "application/problem+json"
    assert client.get("/api/v1/no-such-thing")["Content-Type"] == "application/problem+json"


def dispense(lot="3069020"):
    return {"resourceType": "MedicationDispense", "status": "completed",
            "contained": [{"resourceType": "Medication", "id": "med1",
                           "code": {"coding": [{"system": "http://hl7.org/fhir/sid/ndc", "code": "0591-2332-19"}],
                                    "text": "Valsartan Tablets USP 160 mg"}, "batch": {"lotNumber": lot}}],
            "medicationReference": {"reference": "#med1"}, "subject": {"reference": "Patient/SYN-FM-1"},
            "quantity": {"value": 30}, "whenHandedOver": "2019-02-01T10:00:00Z"}


def post(client, secret, body, content_type="application/fhir+json", accept=None):
    headers = {"Authorization": f"Bearer {secret}"}
    if accept is not None:
        headers["Accept"] = accept
    return client.post("/api/v1/fhir/MedicationDispense", data=json.dumps(body), content_type=content_type,
                       headers=headers)


@pytest.mark.parametrize("content_type", ["application/fhir+json", "application/fhir+json; charset=utf-8",
                                          "application/fhir+json; fhirVersion=4.0", "application/json"])
def test_a_medication_dispense_is_taken_as_fhir_json_and_answered_with_its_receipt(client, secret, content_type):
    response = post(client, secret, dispense(), content_type)
    assert response.status_code == 201, response.content
    assert response["Content-Type"] == JSON
    assert response.json()["id"] == DispensingRecord.objects.get().pk


def test_a_client_that_asks_for_fhir_gets_an_operation_outcome_with_the_recall_warning(client, secret,
                                                                                       hashing_embeddings):
    assert_claim(recall_claim("D-0326-2019", "3069020"))
    response = post(client, secret, dispense(), accept="application/fhir+json")
    assert response.status_code == 201 and response["Content-Type"] == FHIR
    OperationOutcome.model_validate(response.json())
    recorded, warning = response.json()["issue"]
    row = DispensingRecord.objects.get()
    assert recorded["severity"] == "information" and f"Recorded dispensing {row.pk} for Patient/SYN-FM-1" in \
        recorded["diagnostics"] and "lot 3069020" in recorded["diagnostics"]
    assert warning["severity"] == "warning" and "D-0326-2019" in warning["diagnostics"]
    # The same dispensing again: a 409 OperationOutcome, nothing written.
    outcome(post(client, secret, dispense(), accept="application/fhir+json"), 409, "duplicate")
    assert DispensingRecord.objects.count() == 1


def test_a_medication_dispense_that_cannot_be_answered_as_asked_writes_nothing(client, secret):
    outcome(post(client, secret, dispense(), accept="application/fhir+xml"), 406, "not-supported")
    outcome(post(client, secret, dispense(), content_type="application/fhir+xml"), 415, "not-supported")
    issues = outcome(post(client, secret, {**dispense(), "whenHandedOver": "2019-02-01"}), 422, "invalid")
    assert [issue["diagnostics"].split(":")[0] for issue in issues[1:]] == ["whenHandedOver"]
    assert not DispensingRecord.objects.exists() and not DispensingChange.objects.exists()


def test_the_openapi_document_states_what_the_fhir_endpoints_answer_in(client):
    spec = client.get("/api/v1/openapi.json").json()
    created = spec["paths"]["/api/v1/fhir/MedicationDispense"]["post"]["responses"]["201"]["content"]
    assert created["application/json"]["schema"]["$ref"].endswith("/DispensingOut")
    assert created["application/fhir+json"]["schema"]["$ref"].endswith("/OperationOutcome")
    for path in ("/api/v1/fhir/CommunicationRequest", "/api/v1/fhir/Communication/{correction_id}"):
        operation = spec["paths"][path]["get"]
        assert set(operation["responses"]["200"]["content"]) == {"application/fhir+json", "application/json"}
        for status in ("401", "404", "406", "422"):
            for media in ("application/fhir+json", "application/json"):
                assert operation["responses"][status]["content"][media]["schema"]["$ref"].endswith("/OperationOutcome")
        formats = [p for p in operation["parameters"] if p["name"] == "_format"]
        assert formats[0]["schema"]["enum"] == ["json", "application/json", "application/fhir+json"]
    assert set(spec["paths"]["/api/v1/check"]["post"]["responses"]["404"]["content"]) == {"application/problem+json"}
