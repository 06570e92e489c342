"""API v1 ask/decisions: hashed keys, patient/pharmacy scoping, decision visibility, revocation, bad input
(migrated from the hand-written /api/ask views)."""

import json

import pytest

from ask.keys import hash_secret, revoke_keys
from ask.keys import issue_key as create_api_key
from ask.models import ApiClient, ApiKey, ClientPatient
from memory.fact_writes import assert_claim
from memory.models import Decision
from patients.models import Patient
from tests.factories import make_patient, recall_claim

pytestmark = pytest.mark.django_db(transaction=True)


def _patient(ref, client, drug="valsartan", lot="3061169"):
    return make_patient(ref, [(drug, lot)], email="", phone="", client=client)


@pytest.fixture
def world(hashing_embeddings):
    assert_claim(recall_claim("D-0315-2019", "3061169"))
    north, south = ApiClient.objects.create(name="North Pharmacy"), ApiClient.objects.create(name="South Pharmacy")
    alice, bob = _patient("SYN-ALICE", north), _patient("SYN-BOB", north, lot="ZZ-OTHER")
    carol = _patient("SYN-CAROL", south)
    _, alice_key = create_api_key(north, kind=ApiKey.Kind.PATIENT, patient=alice)
    _, bob_key = create_api_key(north, kind=ApiKey.Kind.PATIENT, patient=bob)
    _, north_key = create_api_key(north)
    _, south_key = create_api_key(south)
    return {"alice": alice, "bob": bob, "carol": carol, "alice_key": alice_key, "bob_key": bob_key,
            "north_key": north_key, "south_key": south_key}


def post(client, secret, body):
    return client.post("/api/v1/ask", data=json.dumps(body), content_type="application/json",
                       headers={"Authorization": f"Bearer {secret}"} if secret else {})


def test_keys_are_stored_only_as_sha256_of_the_secret(world):
    key = ApiKey.objects.get(patient=world["alice"])
    assert key.key_hash == hash_secret(world["alice_key"]) and world["alice_key"] not in key.key_hash
    assert key.prefix == world["alice_key"][:12]
    assert not ApiKey.objects.filter(key_hash=world["alice_key"]).exists()


def test_a_patient_key_asks_for_its_own_patient_and_cites_the_facts(client, world):
    response = post(client, world["alice_key"], {"question": "Is my valsartan safe?"})
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["patient"] == "SYN-ALICE" and data["verdict"] == "caution"
    assert data["reads"][0]["fact_key"] == "recall:D-0315-2019:lot:3061169"
    assert data["reads"][0]["load_bearing"] is True and data["reads"][0]["version"] == 1


def test_a_patient_key_cannot_ask_for_another_patient(client, world):
    response = post(client, world["alice_key"], {"question": "Is my valsartan safe?", "patient": "SYN-BOB"})
    assert response.status_code == 403
    assert not Decision.objects.filter(patient_id=world["bob"].pk).exists()
    # naming itself is fine
    assert post(client, world["alice_key"], {"question": "safe?", "patient": "SYN-ALICE"}).status_code == 200


def test_a_patient_key_cannot_read_another_patients_decision(client, world):
    bobs = post(client, world["bob_key"], {"question": "Is my valsartan safe?"}).json()
    own = client.get(f"/api/v1/decisions/{bobs['id']}", headers={"Authorization": f"Bearer {world['bob_key']}"})
    other = client.get(f"/api/v1/decisions/{bobs['id']}", headers={"Authorization": f"Bearer {world['alice_key']}"})
    assert own.status_code == 200 and own.json()["verdict"] == "safe"
    assert other.status_code == 404 and "safe" not in other.content.decode()


def test_a_pharmacy_key_must_name_a_patient_of_its_own_client(client, world):
    assert post(client, world["north_key"], {"question": "safe?"}).status_code == 422
    assert post(client, world["north_key"], {"question": "safe?", "patient": "SYN-CAROL"}).status_code == 404
    ok = post(client, world["north_key"], {"question": "Is the valsartan safe?",
                                           "patient": str(world["alice"].public_id)})
    assert ok.status_code == 200 and ok.json()["patient"] == "SYN-ALICE"
    url = f"/api/v1/decisions/{ok.json()['id']}"
    south_reads = client.get(url, headers={"Authorization": f"Bearer {world['south_key']}"})
    north_reads = client.get(url, headers={"Authorization": f"Bearer {world['north_key']}"})
    assert (south_reads.status_code, north_reads.status_code) == (404, 200)


def test_missing_unknown_and_revoked_keys_are_401(client, world):
    assert post(client, None, {"question": "safe?"}).status_code == 401
    assert post(client, "usk_not-a-key", {"question": "safe?"}).status_code == 401
    assert revoke_keys([ApiKey.objects.get(patient=world["alice"])]) == 1
    response = post(client, world["alice_key"], {"question": "safe?"})
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")


def test_bad_bodies_get_clear_errors_and_write_nothing(client, world):
    secret = world["alice_key"]
    bad = client.post("/api/v1/ask", data="{not json", content_type="application/json",
                      headers={"Authorization": f"Bearer {secret}"})
    assert bad.status_code == 400 and "JSON" in bad.json()["detail"]
    assert bad["Content-Type"] == "application/problem+json"
    assert post(client, secret, {"question": ""}).status_code == 422
    assert post(client, secret, {"question": 5}).status_code == 422
    assert post(client, secret, {"question": "x" * 1001}).status_code == 422
    assert post(client, secret, {"question": "safe?", "subject": ["valsartan"]}).status_code == 422
    assert client.get("/api/v1/ask", headers={"Authorization": f"Bearer {secret}"}).status_code == 405
    assert Decision.objects.count() == 0


def test_a_patient_key_needs_a_patient_of_its_client(world):
    south = ApiClient.objects.get(name="South Pharmacy")
    with pytest.raises(ValueError, match="does not belong"):
        create_api_key(south, kind=ApiKey.Kind.PATIENT, patient=world["alice"])
    with pytest.raises(ValueError, match="needs a patient"):
        create_api_key(south, kind=ApiKey.Kind.PATIENT)


def test_a_patient_key_stops_working_when_its_patient_leaves_the_client(client, world):
    ClientPatient.objects.filter(patient=world["alice"]).delete()
    assert post(client, world["alice_key"], {"question": "Is my valsartan safe?"}).status_code == 403


def test_a_question_naming_two_medicines_gets_one_decision_per_medicine(client, world):
    """Synthetic patient with the recalled valsartan lot (D-0315-2019, real) and an atorvastatin lot no recall
    names: one question, two decisions; the first is also the top-level answer, as before."""
    north = ApiClient.objects.get(name="North Pharmacy")
    make_patient("SYN-DANA", [("valsartan", "3061169"), ("atorvastatin", "NOTRECALLED1")], email="", phone="",
                 client=north)
    response = post(client, world["north_key"], {"question": "Are my valsartan and atorvastatin safe?",
                                                 "patient": "SYN-DANA"})
    assert response.status_code == 200, response.content
    data = response.json()
    verdicts = {d["subject"]: d["verdict"] for d in data["decisions"]}
    assert verdicts == {"valsartan": "caution", "atorvastatin": "safe"}
    assert data["id"] == data["decisions"][0]["id"] and "decisions" not in data["decisions"][0]
    assert Decision.objects.filter(patient_id=Patient.objects.get(external_ref="SYN-DANA").pk).count() == 2
