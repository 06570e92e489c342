"""Corrections out as FHIR R4: CommunicationRequest per correction (draft / active / revoked / completed),
Communication per sent message, searchsets by patient and status, each validated with fhir.resources, each
scoped to the key as the rest of API v1 is. Real sweep drafts of the real D-0315-2019 recall escalated to
Class I (tests/conftest.py drafts); patients synthetic."""

import pytest
from fhir.resources.R4B.bundle import Bundle
from fhir.resources.R4B.communication import Communication
from fhir.resources.R4B.communicationrequest import CommunicationRequest

from api import fhir_out, problems
from ask.keys import issue_key
from ask.models import ApiClient, ApiKey, ClientPatient
from corrections.review import approve, reject
from outbox import dispatch
from tests.factories import RECALL

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


@pytest.fixture
def keys(drafts):
    north, south = ApiClient.objects.create(name="North"), ApiClient.objects.create(name="South")
    for ref in ("SYN-A", "SYN-B"):
        ClientPatient.objects.create(client=north, patient=drafts[ref].patient)
    ClientPatient.objects.create(client=south, patient=drafts["SYN-D"].patient)
    pharmacy, _ = issue_key(north)
    patient_a, _ = issue_key(north, kind=ApiKey.Kind.PATIENT, patient=drafts["SYN-A"].patient)
    other, _ = issue_key(south)
    return {"pharmacy": pharmacy, "patient_a": patient_a, "other": other}


def _statuses(bundle):
    return {e["resource"]["subject"]["reference"]: e["resource"]["status"] for e in bundle.get("entry", [])}


def test_a_correction_is_a_communication_request_whose_status_follows_the_draft(drafts, people, keys):
    a, b = drafts["SYN-A"], drafts["SYN-B"]
    draft = fhir_out.read_request(keys["pharmacy"], a.public_id)
    CommunicationRequest.model_validate(draft)
    assert draft["status"] == "draft" and draft["priority"] == "urgent"  # Class I after the escalation
    assert draft["subject"]["reference"] == "Patient/SYN-A"
    assert draft["about"][0]["identifier"]["value"] == RECALL
    assert draft["payload"][0]["contentString"] == a.drafted_text
    assert draft["medium"][0]["coding"][0]["code"] == "EMAILWRIT"
    approve(a.pk, user=people["pharmacist"])
    assert fhir_out.read_request(keys["pharmacy"], a.public_id)["status"] == "active"
    reject(b.pk, user=people["pharmacist"], reason="Patient collected a replacement")
    revoked = fhir_out.read_request(keys["pharmacy"], b.public_id)
    assert revoked["status"] == "revoked" and revoked["statusReason"]["text"] == "Patient collected a replacement"
    assert dispatch.dispatch_ready().sent == 1
    assert fhir_out.read_request(keys["pharmacy"], a.public_id)["status"] == "completed"


def test_a_sent_message_is_a_communication(drafts, people, keys):
    a = drafts["SYN-A"]
    with pytest.raises(problems.Problem):
        fhir_out.read_communication(keys["pharmacy"], a.public_id)  # not sent yet
    approve(a.pk, user=people["pharmacist"], final_text=a.drafted_text + "\n\nEdited.")
    dispatch.dispatch_ready()
    sent = fhir_out.read_communication(keys["pharmacy"], a.public_id)
    Communication.model_validate(sent)
    assert sent["status"] == "completed" and sent["sent"]
    assert sent["basedOn"] == [{"reference": f"CommunicationRequest/{a.public_id}"}]
    assert sent["recipient"][0]["reference"] == "Patient/SYN-A"
    assert sent["payload"][0]["contentString"].endswith("Edited.")  # what was reviewed and sent
    assert "/r/" not in sent["payload"][0]["contentString"]  # the patient's reply link stays theirs


def test_search_by_patient_and_status_within_the_keys_scope(drafts, people, keys):
    a, b = drafts["SYN-A"], drafts["SYN-B"]
    approve(a.pk, user=people["pharmacist"])
    dispatch.dispatch_ready()
    everything = fhir_out.search_requests(keys["pharmacy"])
    Bundle.model_validate(everything)
    assert _statuses(everything) == {"Patient/SYN-A": "completed", "Patient/SYN-B": "draft"}  # not SYN-D (South)
    assert _statuses(fhir_out.search_requests(keys["pharmacy"], status="draft")) == {"Patient/SYN-B": "draft"}
    assert _statuses(fhir_out.search_requests(keys["pharmacy"], patient="Patient/SYN-A")) == {
        "Patient/SYN-A": "completed"}
    assert fhir_out.search_requests(keys["pharmacy"], patient="SYN-D")["total"] == 0  # another client's
    assert _statuses(fhir_out.search_requests(keys["other"])) == {"Patient/SYN-D": "draft"}
    with pytest.raises(problems.Problem):
        fhir_out.search_requests(keys["pharmacy"], status="bogus")
    sent = fhir_out.search_communications(keys["pharmacy"], patient="SYN-A", status="completed")
    assert sent["total"] == 1 and sent["entry"][0]["resource"]["resourceType"] == "Communication"
    assert fhir_out.search_communications(keys["other"])["total"] == 0
    # A patient key sees what was sent to its own patient, never a draft or another patient's letter.
    assert _statuses(fhir_out.search_requests(keys["patient_a"])) == {"Patient/SYN-A": "completed"}
    with pytest.raises(problems.Problem):
        fhir_out.read_request(keys["patient_a"], b.public_id)
    with pytest.raises(problems.Problem):
        fhir_out.read_request(keys["other"], a.public_id)


def test_the_fhir_endpoints_answer_with_bundles_and_resources_for_the_key(client, drafts, people):
    north = ApiClient.objects.create(name="North")
    for ref in ("SYN-A", "SYN-B"):
        ClientPatient.objects.create(client=north, patient=drafts[ref].patient)
    _, secret = issue_key(north)
    _, outsider = issue_key(ApiClient.objects.create(name="South"))
    a = drafts["SYN-A"]
    approve(a.pk, user=people["pharmacist"])
    dispatch.dispatch_ready()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    found = client.get("/api/v1/fhir/CommunicationRequest", {"patient": "Patient/SYN-A", "status": "completed"},
                       **auth)
    assert found.status_code == 200
    Bundle.model_validate(found.json())
    assert found.json()["total"] == 1 and found.json()["entry"][0]["resource"]["id"] == str(a.public_id)
    one = client.get(f"/api/v1/fhir/CommunicationRequest/{a.public_id}", **auth)
    assert one.status_code == 200 and one.json()["status"] == "completed"
    assert found["Content-Type"] == one["Content-Type"] == "application/fhir+json; charset=utf-8"
    as_json = client.get(f"/api/v1/fhir/CommunicationRequest/{a.public_id}", HTTP_ACCEPT="application/json", **auth)
    assert as_json["Content-Type"] == "application/json; charset=utf-8" and as_json.json() == one.json()
    sent = client.get("/api/v1/fhir/Communication", {"patient": "SYN-A", "_count": 1}, **auth).json()
    assert sent["total"] == 1 and sent["entry"][0]["resource"]["resourceType"] == "Communication"
    assert client.get(f"/api/v1/fhir/Communication/{a.public_id}", **auth).json()["sent"]
    assert client.get("/api/v1/fhir/CommunicationRequest", {"status": "bogus"}, **auth).status_code == 422
    assert client.get("/api/v1/fhir/CommunicationRequest", {"_count": 0}, **auth).status_code == 422
    assert client.get(f"/api/v1/fhir/CommunicationRequest/{a.public_id}",
                      HTTP_AUTHORIZATION=f"Bearer {outsider}").status_code == 404
    assert client.get("/api/v1/fhir/CommunicationRequest").status_code == 401
