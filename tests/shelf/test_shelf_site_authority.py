"""A key acts on the shelf only at the sites its client holds (docs/tenancy.md): an EPCIS document sent to
any other site is a 403 that names the site, and nothing of it lands. SYNTHETIC shipments of the real
recalled lot of D-0502-2019 (tests/epcis_docs.py)."""

import pytest

from ask.keys import grant_site, issue_key
from ask.models import ApiClient
from shelf.models import ReceivedEvent, ShelfEvent, Unit
from shelf.receiving import receive
from tests import epcis_docs as d

pytestmark = pytest.mark.django_db

SITE = "Main St"


def _post(client, secret, body, site=SITE):
    return client.post(f"/api/v1/epcis?site={site.replace(' ', '%20')}", body, content_type="application/xml",
                       headers={"Authorization": f"Bearer {secret}"})


def _destroying(serial_list) -> bytes:
    return d.xml_document([d.xml_object_event(d.units(d.LOSARTAN_GTIN, serial_list), "destroying")])


@pytest.fixture
def stock():
    """Five units on hand at Main St, received by the site's own system (the shelf service, as the command)."""
    serial_list = d.serials("S", 5)
    assert receive(d.shipment_xml(serial_list), site=SITE, source="supplier").ok
    return serial_list


def test_a_key_of_another_client_cannot_destroy_units_at_a_site_it_does_not_hold(client, stock):
    _, stranger = issue_key(ApiClient.objects.create(name="South"))
    events = ReceivedEvent.objects.count()

    response = _post(client, stranger, _destroying(stock))

    assert response.status_code == 403, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert "Main St" in response.json()["detail"]
    assert Unit.objects.filter(site=SITE, state=Unit.State.ON_HAND).count() == 5
    assert ReceivedEvent.objects.count() == events
    assert not ShelfEvent.objects.filter(actor_label__startswith="api:").exists()


def test_the_key_of_a_client_holding_the_site_moves_its_units(client, stock):
    north = ApiClient.objects.create(name="North")
    grant_site(north, SITE)
    _, own = issue_key(north)

    response = _post(client, own, _destroying(stock[:2]))

    assert response.status_code == 200, response.content
    assert response.json()["units_changed"] == 2
    assert Unit.objects.filter(site=SITE, state=Unit.State.DESTROYED).count() == 2


def test_holding_one_site_gives_no_other(client, stock):
    north = ApiClient.objects.create(name="North")
    grant_site(north, "Drive-through")
    _, key = issue_key(north, pharmacist=True)

    refused = _post(client, key, _destroying(stock))
    also_refused = _post(client, key, d.shipment_xml(d.serials("T", 1)), site="main st")  # names compare exactly

    for response in (refused, also_refused):
        assert response.status_code == 403, response.content
        assert response.json()["type"] == "/api/v1/problems/site-not-held"
    assert Unit.objects.filter(state=Unit.State.ON_HAND).count() == 5


def test_a_refusal_reads_no_document(client):
    """The site is refused before the body is read: an unreadable document is still a 403, not a 422."""
    _, stranger = issue_key(ApiClient.objects.create(name="South"))
    response = _post(client, stranger, b"<not epcis")
    assert response.status_code == 403 and response.json()["type"] == "/api/v1/problems/site-not-held"


def test_a_site_is_granted_once_and_must_be_a_name():
    north = ApiClient.objects.create(name="North")
    assert grant_site(north, SITE) == grant_site(north, SITE)
    for bad in ("", " Main St", "x" * 201, "Main\x00St"):
        with pytest.raises(ValueError, match="1 to 200 characters"):
            grant_site(north, bad)
    assert list(north.sites.values_list("site", flat=True)) == [SITE]
