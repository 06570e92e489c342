"""Upgrading grants each API client the sites it already has data at, so existing keys keep working there
(ask/migrations/0003_client_sites.py): the sites its patients were dispensed at and the sites its pharmacy
keys received EPCIS documents at. Stock received by a command, and a key prefix shared across clients,
grant nothing. Patients and shipments SYNTHETIC (the real recalled lot of D-0502-2019, tests/epcis_docs.py)."""

import importlib

import pytest
from django.apps import apps

from ask.keys import issue_key
from ask.models import ApiClient, ApiKey, ClientSite
from shelf.receiving import receive
from tests import epcis_docs as d
from tests.factories import make_patient

pytestmark = pytest.mark.django_db

migration = importlib.import_module("ask.migrations.0003_client_sites")


def _receive_as(key: ApiKey, site: str, serial_prefix: str):
    # api/epcis.py names the key by prefix in the receipt's audit row, exactly so
    assert receive(d.shipment_xml(d.serials(serial_prefix, 1)), site=site, source="api", actor=f"api:{key.prefix}").ok


def _held() -> set[tuple[str, str]]:
    return set(ClientSite.objects.values_list("client__name", "site"))


def test_each_client_keeps_the_sites_it_has_data_at():
    north, south, east = (ApiClient.objects.create(name=n) for n in ("North", "South", "East"))
    make_patient("SYN-N1", [{"drug": "valsartan", "lot": "3069020", "site": "Main St"},
                            {"drug": "valsartan", "lot": "3069021", "site": ""}], client=north)
    make_patient("SYN-S1", [{"drug": "valsartan", "lot": "3069020", "site": "Clinic pharmacy"}], client=south)
    make_patient("SYN-NONE", [{"drug": "valsartan", "lot": "3069020", "site": "Back room"}])  # no client
    south_key, _ = issue_key(south)
    _receive_as(south_key, "Drive-through", "A")
    assert receive(d.shipment_xml(d.serials("B", 1)), site="Warehouse", actor="manage.py receive_epcis").ok
    # Two keys of two clients that happen to share a prefix: the receipt cannot say whose it was.
    east_key, _ = issue_key(east)
    north_twin, _ = issue_key(north)
    ApiKey.objects.filter(pk=north_twin.pk).update(prefix=east_key.prefix)
    _receive_as(east_key, "Loading bay", "C")
    ClientSite.objects.all().delete()

    migration.grant_sites_with_data(apps, None)
    migration.grant_sites_with_data(apps, None)  # a re-run adds nothing

    assert _held() == {("North", "Main St"), ("South", "Clinic pharmacy"), ("South", "Drive-through")}
    assert ClientSite.objects.count() == 3


def _client_form(name: str, site: str) -> dict:
    return {"name": name,
            "patient_links-TOTAL_FORMS": "0", "patient_links-INITIAL_FORMS": "0",
            "sites-TOTAL_FORMS": "1", "sites-INITIAL_FORMS": "0", "sites-0-site": site}


def test_an_operator_grants_a_site_in_the_admin(admin_client):
    response = admin_client.post("/admin/ask/apiclient/add/", _client_form("North", "Main St"))
    assert response.status_code == 302, response.content[:2000]
    assert _held() == {("North", "Main St")}
    page = admin_client.get(f"/admin/ask/apiclient/{ApiClient.objects.get().pk}/change/").content.decode()
    assert "North @ Main St" in page and 'name="sites-0-site"' in page


def test_the_admin_refuses_a_site_no_receipt_could_name(admin_client):
    response = admin_client.post("/admin/ask/apiclient/add/", _client_form("North", "M" * 201))
    assert response.status_code == 200
    assert not ApiClient.objects.exists() and not ClientSite.objects.exists()
