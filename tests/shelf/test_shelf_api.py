"""POST /api/v1/epcis: SYNTHETIC shipments of the real recalled lot of D-0502-2019 (tests/epcis_docs.py)."""

import pytest

from ask.keys import grant_site, issue_key
from ask.models import ApiClient, ApiKey
from shelf.models import Unit
from tests import epcis_docs as d
from tests.factories import make_patient

pytestmark = pytest.mark.django_db

URL = "/api/v1/epcis?site=Main%20St"


@pytest.fixture
def pharmacy_key():
    north = ApiClient.objects.create(name="North")
    grant_site(north, "Main St")
    return issue_key(north)[1]


def _post(client, key, body, content_type="application/xml", url=URL):
    return client.post(url, body, content_type=content_type, headers={"Authorization": f"Bearer {key}"})


def test_an_xml_shipment_lands_and_a_resend_is_skipped(client, pharmacy_key):
    doc = d.shipment_xml(d.serials("Q", 3))
    response = _post(client, pharmacy_key, doc)
    assert response.status_code == 200, response.content
    assert response.json() == {"site": "Main St", "applied": 3, "skipped": 0, "refused": [], "refused_total": 0,
                               "units_new": 3, "units_changed": 0}
    again = _post(client, pharmacy_key, doc).json()
    assert (again["applied"], again["skipped"]) == (0, 3)
    assert Unit.objects.filter(site="Main St", state="on_hand").count() == 3


def test_a_json_ld_document_with_a_bad_event_answers_its_reason(client, pharmacy_key):
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("Q", 1))
    doc = d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot=d.LOSARTAN_LOT),
                           d.json_event("ObjectEvent", epcs=["urn:epc:id:sgtin:0614141.107346.2017"],
                                        step="receiving")])
    body = _post(client, pharmacy_key, doc, "application/ld+json").json()
    assert body["applied"] == 1 and "not a US drug GTIN" in body["refused"][0]["reason"]


def test_xxe_is_a_422_problem(client, pharmacy_key):
    doc = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
           b'<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:1">&x;</epcis:EPCISDocument>')
    response = _post(client, pharmacy_key, doc)
    assert response.status_code == 422 and response["Content-Type"] == "application/problem+json"
    assert "entities" in response.json()["detail"]


def test_wrong_type_oversize_no_site_and_no_key_are_refused(client, pharmacy_key, monkeypatch):
    assert _post(client, pharmacy_key, b"x", "text/plain").status_code == 415
    assert _post(client, pharmacy_key, d.shipment_xml(["1"]), url="/api/v1/epcis").status_code == 422
    assert client.post(URL, d.shipment_xml(["1"]), content_type="application/xml").status_code == 401
    monkeypatch.setattr("api.epcis.EPCIS_MAX_BODY_BYTES", 100)
    assert _post(client, pharmacy_key, d.shipment_xml(["1"])).status_code == 413


def test_a_patient_key_may_not_receive(client):
    north = ApiClient.objects.create(name="North")
    patient = make_patient("SYN-EPCIS", client=north)
    _, secret = issue_key(north, kind=ApiKey.Kind.PATIENT, patient=patient)
    assert _post(client, secret, d.shipment_xml(["1"])).status_code == 403
    assert not Unit.objects.exists()
