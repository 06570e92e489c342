"""API v1 per endpoint: who may do what (no key, revoked key, another client's decision, a
patient-bound key naming another patient in the body or a FHIR reference), bad bodies (oversized,
malformed, nested, NUL, wrong content type), each a documented RFC 9457 problem (a FHIR OperationOutcome
on the FHIR endpoints) that changes nothing; and what each endpoint does: check names what changed, replay
answers by belief time, dispensing goes through the admin's validation and save_dispensing, exposure is
pharmacist-only."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from fhir.resources.R4B.operationoutcome import OperationOutcome

from ask.keys import issue_key, revoke_keys
from ask.models import ApiClient, ApiKey
from memory.fact_writes import assert_claim, retract_claim
from memory.models import Decision
from patients.dispensing import dispensing_changed
from patients.models import DispensingChange, DispensingRecord
from tests.factories import make_patient, recall_claim

pytestmark = pytest.mark.django_db(transaction=True)

RECALL, LOT = "D-0326-2019", "3069020"  # real valsartan recall (openFDA), synthetic patients


def _patient(ref, client, lot=LOT):
    return make_patient(ref, [{"drug": "valsartan", "lot": lot, "quantity": 30}], email="", phone="", client=client,
                        dispensed_at=datetime(2019, 1, 5, 12, tzinfo=UTC), through_service=True)


@pytest.fixture
def world(hashing_embeddings):
    assert_claim(recall_claim(RECALL, LOT))
    north, south = ApiClient.objects.create(name="North"), ApiClient.objects.create(name="South")
    alice, bob = _patient("SYN-ALICE", north), _patient("SYN-BOB", north, lot="3069021")
    carol = _patient("SYN-CAROL", south)
    keys = {
        "alice": issue_key(north, kind=ApiKey.Kind.PATIENT, patient=alice)[1],
        "north": issue_key(north)[1],
        "pharmacist": issue_key(north, pharmacist=True)[1],
        "south": issue_key(south, pharmacist=True)[1],
    }
    return {"alice": alice, "bob": bob, "carol": carol, "keys": keys}


def auth(secret):
    return {"Authorization": f"Bearer {secret}"} if secret else {}


def post(client, path, body, secret, content_type="application/json"):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(f"/api/v1{path}", data=data, content_type=content_type, headers=auth(secret))


def get(client, path, secret):
    return client.get(f"/api/v1{path}", headers=auth(secret))


def problem(response, status):
    assert response.status_code == status, response.content
    if response.wsgi_request.path.startswith("/api/v1/fhir/"):
        return outcome(response, status)
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and body["type"].startswith("/api/v1/problems/") and body["title"]
    return body


def outcome(response, status):
    """A FHIR endpoint refuses with a FHIR R4 OperationOutcome (api/fhir_media.py), read back as the problem it
    carries: its type in the first issue's details, its field errors one issue each."""
    assert response["Content-Type"] == "application/fhir+json; charset=utf-8"
    body = response.json()
    OperationOutcome.model_validate(body)
    first, *fields = body["issue"]
    assert first["severity"] == "error" and first["details"]["coding"][0]["system"] == "urn:unsay:problem"
    return {"status": status, "type": "/api/v1/problems/" + first["details"]["coding"][0]["code"],
            "title": first["details"]["text"], "detail": first["diagnostics"],
            "errors": [dict(zip(("field", "message"), issue["diagnostics"].split(": ", 1), strict=True))
                       for issue in fields]}


def state():
    return (Decision.objects.count(), DispensingRecord.objects.count(), DispensingChange.objects.count())


def fhir_dispense(patient_ref="SYN-ALICE", lot="3069020", status="completed"):
    return {
        "resourceType": "MedicationDispense", "status": status,
        "contained": [{"resourceType": "Medication", "id": "med1",
                       "code": {"coding": [{"system": "http://hl7.org/fhir/sid/ndc", "code": "0591-2332-19"}],
                                "text": "Valsartan Tablets USP 160 mg"},
                       "batch": {"lotNumber": lot, "expirationDate": "2020-06-30"}}],
        "medicationReference": {"reference": "#med1"},
        "subject": {"reference": f"Patient/{patient_ref}"},
        "quantity": {"value": 30}, "whenHandedOver": "2019-02-01T10:00:00Z",
    }


def a_decision(client, world):
    response = post(client, "/ask", {"question": "Is my valsartan safe?"}, world["keys"]["alice"])
    assert response.status_code == 200, response.content
    return response.json()


def endpoints(decision_id):
    """(method, path, body, content type) for every endpoint, with a body that would succeed."""
    dispensing = {"patient": "SYN-ALICE", "drug": "valsartan", "lot": "3069020", "quantity": 30,
                  "dispensed_at": "2019-03-01T10:00:00Z"}
    return [
        ("post", "/ask", {"question": "Is my valsartan safe?", "patient": "SYN-ALICE"}, "application/json"),
        ("get", f"/decisions/{decision_id}", None, None),
        ("post", "/check", {"decision_id": decision_id}, "application/json"),
        ("get", f"/decisions/{decision_id}/replay", None, None),
        ("post", "/dispensing", dispensing, "application/json"),
        ("post", "/fhir/MedicationDispense", fhir_dispense(), "application/fhir+json"),
        ("get", f"/recalls/{RECALL}/exposure", None, None),
    ]


def call(client, method, path, body, content_type, secret):
    if method == "get":
        return get(client, path, secret)
    return post(client, path, body, secret, content_type)


# --- identity ---------------------------------------------------------------------------------------

def test_no_key_unknown_key_and_revoked_key_are_401_problems_on_every_endpoint(client, world):
    decision_id = a_decision(client, world)["id"]
    before = state()
    revoke_keys(ApiKey.objects.filter(pharmacist_scope=True, client__name="North"))
    for method, path, body, content_type in endpoints(decision_id):
        for secret in (None, "usk_not-a-key", "x" * 5000, world["keys"]["pharmacist"]):
            response = call(client, method, path, body, content_type, secret)
            problem(response, 401)
            assert response["WWW-Authenticate"].startswith("Bearer"), path
    assert state() == before


def test_another_clients_decision_is_404_everywhere_and_leaks_nothing(client, world):
    decision = a_decision(client, world)
    before = state()
    for method, path in (("get", f"/decisions/{decision['id']}"), ("get", f"/decisions/{decision['id']}/replay")):
        body = problem(call(client, method, path, None, None, world["keys"]["south"]), 404)
        assert decision["answer"] not in json.dumps(body)
    body = problem(post(client, "/check", {"decision_ids": [decision["id"]]}, world["keys"]["south"]), 404)
    assert "caution" not in json.dumps(body)
    # another patient's key of the same client: the same 404
    bobs_key = issue_key(ApiClient.objects.get(name="North"), kind=ApiKey.Kind.PATIENT, patient=world["bob"])[1]
    problem(get(client, f"/decisions/{decision['id']}", bobs_key), 404)
    assert state() == before
    assert get(client, f"/decisions/{decision['id']}", world["keys"]["north"]).status_code == 200


def test_a_patient_key_naming_another_patient_is_refused_in_the_body_and_the_fhir_reference(client, world):
    secret = world["keys"]["alice"]
    before = state()
    problem(post(client, "/ask", {"question": "Is my valsartan safe?", "patient": "SYN-BOB"}, secret), 403)
    problem(post(client, "/ask", {"question": "Is my valsartan safe?", "patient": "SYN-CAROL"}, secret), 403)
    problem(post(client, "/dispensing", {"patient": "SYN-BOB", "lot": "3069020", "drug": "valsartan", "quantity": 1,
                                         "dispensed_at": "2019-03-01T10:00:00Z"}, secret), 403)
    problem(post(client, "/fhir/MedicationDispense", fhir_dispense("SYN-BOB"), secret, "application/fhir+json"), 403)
    assert state() == before
    # and a pharmacy key can't name another client's patient: 404, as if they did not exist
    problem(post(client, "/ask", {"question": "safe?", "patient": "SYN-CAROL"}, world["keys"]["north"]), 404)
    problem(post(client, "/fhir/MedicationDispense", fhir_dispense("SYN-CAROL"), world["keys"]["north"],
                 "application/fhir+json"), 404)
    assert state() == before


# --- bad requests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/ask", "/check", "/dispensing", "/fhir/MedicationDispense"])
def test_bad_bodies_are_problems_and_change_nothing(client, world, settings, path):
    secret = world["keys"]["north"]
    content_type = "application/fhir+json" if path.startswith("/fhir") else "application/json"
    before = state()
    settings.UNSAY_API_MAX_BODY_BYTES = 4096
    problem(post(client, path, {"question": "x" * 5000}, secret, content_type), 413)
    problem(post(client, path, "{not json", secret, content_type), 400)
    problem(post(client, path, b"\xff\xfe{}", secret, content_type), 400)
    problem(post(client, path, "[1, 2]", secret, content_type), 400)
    problem(post(client, path, "[" * 1000 + "]" * 1000, secret, content_type), 400)
    problem(post(client, path, {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {"j": {"k": {"l": {
        "m": {"n": {"o": {"p": {"q": {"r": {"s": {"t": {"u": 1}}}}}}}}}}}}}}}}}}}}}, secret, content_type), 400)
    nul = problem(post(client, path, {"question": "safe?\u0000", "patient": "SYN-ALICE", "lot": "30\u00006"},
                       secret, content_type), 400)
    assert "NUL" in nul["detail"]
    problem(post(client, path, {"question": "safe?"}, secret, "text/plain"), 415)
    problem(post(client, path, "question=safe", secret, "application/x-www-form-urlencoded"), 415)
    assert state() == before


def test_schema_errors_are_422_problems_naming_the_field(client, world):
    body = problem(post(client, "/ask", {"question": "safe?", "patient": "SYN-ALICE", "extra": 1},
                        world["keys"]["north"]), 422)
    assert any(e["field"].endswith("extra") for e in body["errors"])
    body = problem(post(client, "/check", {"decision_id": "not-a-uuid"}, world["keys"]["north"]), 422)
    assert body["errors"]
    problem(post(client, "/check", {}, world["keys"]["north"]), 422)
    problem(get(client, "/decisions/not-a-uuid", world["keys"]["north"]), 422)
    problem(get(client, "/recalls/not a recall/exposure", world["keys"]["pharmacist"]), 422)
    problem(get(client, f"/recalls/{RECALL}/exposure?x=%00", world["keys"]["pharmacist"]), 400)


def test_requests_are_limited_per_key_across_processes_by_a_database_counter(client, world, settings):
    settings.UNSAY_API_RATE_PER_MINUTE = 3
    secret = world["keys"]["north"]
    statuses = [get(client, f"/recalls/{RECALL}/exposure", secret).status_code for _ in range(3)]
    assert statuses == [403, 403, 403]  # counted even when refused for scope
    limited = get(client, f"/recalls/{RECALL}/exposure", secret)
    problem(limited, 429)
    assert 1 <= int(limited["Retry-After"]) <= 60
    # another key has its own allowance
    assert get(client, f"/recalls/{RECALL}/exposure", world["keys"]["pharmacist"]).status_code == 200
    from ask.models import UsageCounter

    north_key = ApiKey.objects.get(pharmacist_scope=False, client__name="North", kind="pharmacy")
    assert UsageCounter.objects.get(scope=f"apikey:{north_key.pk}").n == 3


# --- what the endpoints do --------------------------------------------------------------------------

def test_a_decision_shows_verdict_reads_with_versions_premises_and_inputs(client, world):
    decision = a_decision(client, world)
    assert decision["verdict"] == "caution" and decision["status"] == "standing"
    assert decision["current"]["id"] == decision["id"] and decision["superseded_by"] is None
    read = next(r for r in decision["reads"] if r["fact_key"] == f"recall:{RECALL}:lot:{LOT}")
    assert read["version"] == 1 and read["load_bearing"] is True and read["believed_now"] is True
    assert isinstance(decision["premises"], list) and isinstance(decision["inputs"], list)
    again = get(client, f"/decisions/{decision['id']}", world["keys"]["alice"]).json()
    assert again == {k: v for k, v in decision.items() if k != "decisions"}  # /ask adds the per-medicine list


def test_check_names_the_retracted_load_bearing_read_and_its_successor(client, world):
    decision = a_decision(client, world)
    fresh = post(client, "/check", {"decision_id": decision["id"]}, world["keys"]["alice"]).json()["results"][0]
    assert fresh["standing"] is True and fresh["state"] == "standing" and fresh["changes"] == []

    assert_claim(recall_claim(RECALL, LOT, classification="Class I"), reason="reclassified")  # no sweep yet
    stale = post(client, "/check", {"decision_ids": [decision["id"]]}, world["keys"]["alice"]).json()["results"][0]
    assert stale["standing"] is False and stale["state"] == "stale" and stale["current"] is None
    change = stale["changes"][0]
    assert change["kind"] == "retracted_read" and change["read"]["version"] == 1
    assert change["now"]["version"] == 2 and "Class I" in change["now"]["statement"]


def test_check_of_a_superseded_decision_names_its_replacement(client, world):
    from corrections.sweep.run import sweep

    decision = a_decision(client, world)
    assert_claim(recall_claim(RECALL, LOT, classification="Class I"), reason="reclassified")
    sweep()
    result = post(client, "/check", {"decision_id": decision["id"]}, world["keys"]["alice"]).json()["results"][0]
    assert result["state"] == "superseded" and result["current_verdict"] == "stop"
    assert result["corrections"][0]["new_verdict"] == "stop"
    shown = get(client, f"/decisions/{decision['id']}", world["keys"]["alice"]).json()
    assert shown["superseded_by"]["id"] == result["current"]["id"]


def test_replay_answers_what_was_believed_at_an_instant(client, world):
    decision = a_decision(client, world)
    retract_claim(f"recall:{RECALL}:lot:{LOT}", reason="test", by="test")
    secret = world["keys"]["alice"]
    then = get(client, f"/decisions/{decision['id']}/replay", secret).json()
    assert (f"recall:{RECALL}:lot:{LOT}", 1) in {(b["fact_key"], b["version"]) for b in then["believed"]}
    assert then["route"] == "bitemporal" and then["at"] == then["decided_at"]
    now = timezone.now().isoformat().replace("+00:00", "Z")
    after = get(client, f"/decisions/{decision['id']}/replay?at={now}", secret).json()
    assert (f"recall:{RECALL}:lot:{LOT}", 1) not in {(b["fact_key"], b["version"]) for b in after["believed"]}
    future = (timezone.now() + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert "future" in problem(get(client, f"/decisions/{decision['id']}/replay?at={future}", secret), 422)["detail"]


def test_dispensing_json_is_validated_as_the_admin_form_and_written_by_save_dispensing(client, world):
    announced = []

    def receiver(sender, changes, **kwargs):
        announced.extend(changes)

    dispensing_changed.connect(receiver)
    try:
        secret = world["keys"]["north"]
        # Mylan valsartan (the recall's own product, D-0326-2019): a confirmed match, so staff are warned.
        body = {"patient": "SYN-BOB", "drug": "Valsartan", "ndc": "0378-5814-77", "lot": "lot # 3069020",
                "quantity": 30, "dispensed_at": "2019-03-01T10:00:00Z"}
        response = post(client, "/dispensing", body, secret)
        assert response.status_code == 201, response.content
        data = response.json()
        assert data["lot"] == "3069020" and data["ndc"] == "00378-5814-77" and data["patient"] == "SYN-BOB"
        assert data["drug"] == "valsartan"
        assert "active recall" in data["recall_warning"], data
        change = DispensingChange.objects.get(dispensing_id=data["id"])
        assert change.action == "created" and change.actor_label.startswith("api:usk_")
        assert (world["bob"].pk, data["drug"]) in announced

        before = state()
        problem(post(client, "/dispensing", body, secret), 409)
        bad = problem(post(client, "/dispensing", {**body, "ndc": "12345", "dispensed_at": "2019-04-01T10:00:00Z"},
                           secret), 422)
        assert any(e["field"] == "ndc" for e in bad["errors"])
        problem(post(client, "/dispensing", {**body, "quantity": 0}, secret), 422)
        problem(post(client, "/dispensing", {k: v for k, v in body.items() if k != "patient"}, secret), 422)
        problem(post(client, "/dispensing", {**body, "patient": None}, world["keys"]["alice"]), 403)
        assert state() == before
    finally:
        dispensing_changed.disconnect(receiver)


def test_a_fhir_medication_dispense_takes_the_lot_from_the_contained_medication(client, world):
    secret = world["keys"]["north"]
    response = post(client, "/fhir/MedicationDispense", fhir_dispense("SYN-BOB", lot="3069020"), secret,
                    "application/fhir+json")
    assert response.status_code == 201, response.content
    record = DispensingRecord.objects.get(pk=response.json()["id"])
    assert (record.patient, record.lot, record.ndc, record.quantity) == (world["bob"], "3069020", "00591-2332-19", 30)
    assert record.expiry.isoformat() == "2020-06-30" and record.drug == "valsartan"
    before = state()
    for broken in (fhir_dispense(status="in-progress"), {**fhir_dispense(), "medicationReference": {"reference": "#x"}},
                   {**fhir_dispense(), "resourceType": "Patient"}, {**fhir_dispense(), "quantity": {"value": "x"}},
                   {**fhir_dispense(), "subject": {"reference": "Group/1"}}):
        problem(post(client, "/fhir/MedicationDispense", broken, secret, "application/fhir+json"), 422)
    assert state() == before


def test_exposure_is_for_pharmacist_keys_and_lists_only_their_clients_patients(client, world):
    path = f"/recalls/{RECALL}/exposure"
    problem(get(client, path, world["keys"]["alice"]), 403)
    problem(get(client, path, world["keys"]["north"]), 403)
    problem(get(client, "/recalls/D-9999-2099/exposure", world["keys"]["pharmacist"]), 404)
    north = get(client, path, world["keys"]["pharmacist"]).json()
    assert [p["patient"] for p in north["patients"]] == ["SYN-ALICE"] and north["patients"][0]["match"] == "lot"
    south = get(client, path, world["keys"]["south"]).json()
    assert [p["patient"] for p in south["patients"]] == ["SYN-CAROL"]


def test_the_openapi_document_and_docs_page_are_served(client):
    spec = client.get("/api/v1/openapi.json").json()
    assert set(spec["paths"]) == {"/api/v1/ask", "/api/v1/decisions/{decision_id}", "/api/v1/check",
                                  "/api/v1/decisions/{decision_id}/replay", "/api/v1/dispensing",
                                  "/api/v1/fhir/MedicationDispense", "/api/v1/recalls/{recall_number}/exposure",
                                  "/api/v1/epcis", "/api/v1/fhir/Communication",
                                  "/api/v1/fhir/Communication/{correction_id}", "/api/v1/fhir/CommunicationRequest",
                                  "/api/v1/fhir/CommunicationRequest/{correction_id}"}
    assert spec["components"]["securitySchemes"]["ApiKeyAuth"]["scheme"] == "bearer"
    assert client.get("/api/v1/docs").status_code == 200
    problem(client.get("/api/v1/no-such-thing"), 404)


# --- the OpenAPI document says what the validation does ------------------------------------------------

@pytest.mark.parametrize("at", [
    "0.5", "1551434400", "2019-01-05T12:00:00", "2019-01-05", "2019-01-05 12:00:00Z", "0000-01-01T00:00:00Z",
    "10000-01-01T00:00:00Z", "0001-01-01T00:00:00%2B00:01", "2019-01-05T12:00:00%2B24:00",
    "2019-01-05T12:00:00%2B02:60", "2016-12-31T23:59:60Z", "2019-02-30T12:00:00Z", "2019-01-05T12:00:00 02:00",
])
def test_replay_at_is_an_instant_with_a_zone_python_and_postgresql_can_hold(client, world, at):
    decision = a_decision(client, world)
    body = problem(get(client, f"/decisions/{decision['id']}/replay?at={at}", world["keys"]["alice"]), 422)
    assert [e["field"] for e in body["errors"]] == ["at"], body


def test_replay_at_any_rfc_3339_offset_is_read_in_utc(client, world):
    decision = a_decision(client, world)
    # PostgreSQL holds no offset beyond 15:59; the instant reaches it in UTC.
    then = get(client, f"/decisions/{decision['id']}/replay?at=0657-04-07T20:20:01%2B22:26", world["keys"]["alice"])
    assert then.status_code == 200, then.content
    assert then.json()["at"] == "0657-04-06T21:54:01Z" and then.json()["believed"] == []
    edge = get(client, f"/decisions/{decision['id']}/replay?at=0001-01-01T00:00:00.1234567z", world["keys"]["alice"])
    assert edge.status_code == 200 and edge.json()["at"].startswith("0001-01-01T00:00:00.123")


@pytest.mark.parametrize("dispensed_at", [1551434400, 0.5, "2019-03-01T10:00:00", "2019-03-01", None,
                                          "0000-03-01T10:00:00Z"])
def test_dispensed_at_is_an_instant_with_a_zone(client, world, dispensed_at):
    before = state()
    body = {"patient": "SYN-BOB", "drug": "valsartan", "lot": "3069021", "quantity": 30, "dispensed_at": dispensed_at}
    errors = problem(post(client, "/dispensing", body, world["keys"]["north"]), 422)["errors"]
    assert [e["field"] for e in errors] == ["dispensed_at"]
    fhir = {**fhir_dispense("SYN-BOB"), "whenHandedOver": dispensed_at}
    errors = problem(post(client, "/fhir/MedicationDispense", fhir, world["keys"]["north"],
                          "application/fhir+json"), 422)["errors"]
    assert [e["field"] for e in errors] == ["whenHandedOver"]
    assert state() == before


@pytest.mark.parametrize("expiry", [1593475200, 0, "2020-06-30T00:00:00", "2020-06-31"])
def test_expiry_is_a_yyyy_mm_dd_date(client, world, expiry):
    body = {"patient": "SYN-BOB", "drug": "valsartan", "lot": "3069021", "quantity": 30,
            "dispensed_at": "2019-03-01T10:00:00Z", "expiry": expiry}
    errors = problem(post(client, "/dispensing", body, world["keys"]["north"]), 422)["errors"]
    assert [e["field"] for e in errors] == ["expiry"]


def test_the_schema_states_the_one_of_the_check_body_and_the_fhir_resource_type(client, world):
    from jsonschema import Draft202012Validator

    spec = client.get("/api/v1/openapi.json").json()
    check_in = Draft202012Validator(spec["components"]["schemas"]["CheckIn"])
    some_id = "00000000-0000-0000-0000-000000000000"
    for body in ({}, {"decision_id": some_id, "decision_ids": [some_id]}, {"decision_id": None, "decision_ids": None}):
        assert not check_in.is_valid(body)
        problem(post(client, "/check", body, world["keys"]["north"]), 422)
    for body in ({"decision_id": some_id}, {"decision_ids": [some_id]},
                 {"decision_id": None, "decision_ids": [some_id]}):
        assert check_in.is_valid(body)
        problem(post(client, "/check", body, world["keys"]["north"]), 404)

    fhir = spec["paths"]["/api/v1/fhir/MedicationDispense"]["post"]["requestBody"]["content"]
    for media in ("application/fhir+json", "application/json"):
        assert fhir[media]["schema"]["properties"]["resourceType"] == {"const": "MedicationDispense"}
        assert not Draft202012Validator(fhir[media]["schema"]).is_valid({**fhir_dispense(), "resourceType": "Patient"})
    problem(post(client, "/fhir/MedicationDispense", {**fhir_dispense(), "resourceType": "Patient"},
                 world["keys"]["north"], "application/fhir+json"), 422)


def test_the_schema_refuses_nul_in_text_as_the_api_does(client, world):
    spec = client.get("/api/v1/openapi.json").json()
    ask_in, dispensing_in = (spec["components"]["schemas"][name]["properties"] for name in ("AskIn", "DispensingIn"))
    from jsonschema import Draft202012Validator

    for schema in (ask_in["question"], ask_in["subject"], dispensing_in["lot"], dispensing_in["drug"]):
        validator = Draft202012Validator(schema)
        assert validator.is_valid("valsartan") and not validator.is_valid("vals\u0000artan")
    assert not Draft202012Validator(ask_in["question"]).is_valid("  ")
    body = problem(post(client, "/ask", {"question": "Is my valsartan safe?", "subject": "vals\u0000artan"},
                        world["keys"]["alice"]), 400)
    assert "NUL" in body["detail"]
