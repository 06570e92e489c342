"""The shelf page (/shelf/): a person sees the stock, quarantine, open recall tasks and units that left with patients
of the sites an operator granted them (shelf.StaffSite, ADR 0015), never another site's; filters refuse a site
they do not hold with the reason; the CSV carries the same rows.
Recall: REAL D-0502-2019. Shipments, sites and patient: SYNTHETIC (tests/epcis_docs.py)."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.fact_writes import assert_claim
from shelf.models import StaffSite
from shelf.receiving import receive
from tests import epcis_docs as d
from tests.factories import recall_claim
from tests.shelf.test_shelf_worklist import (
    RECALL,
    SITE,
    shelf_world,  # noqa: F401 (a fixture)
)
from worklist import recall_list, site_shelf

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]

OTHER_SITE = "Elm St"


@pytest.fixture
def two_sites(shelf_world, people):  # noqa: F811
    """Main St (shelf_world: 3 recalled units on hand, 1 dispensed to SYN-SHELF) and Elm St (2 recalled units
    received after the recall matched); phil works at Main St, sam at Elm St."""
    assert receive(d.shipment_xml(d.serials("E", 2), case=2), site=OTHER_SITE).applied >= 1
    StaffSite.objects.create(user=people["pharmacist"], site=SITE)
    StaffSite.objects.create(user=people["staff"], site=OTHER_SITE)
    return shelf_world


def _rows(client, url):
    response = client.get(url)
    header, *rows = csv.reader(io.StringIO(response.content.decode()))
    return response, header, rows


def test_a_person_sees_only_the_sites_they_hold(two_sites, people):
    phil = site_shelf.site_shelf(people["pharmacist"])
    sam = site_shelf.site_shelf(people["staff"])
    assert {lot.site for lot in phil.lots} == {SITE} and {lot.site for lot in sam.lots} == {OTHER_SITE}
    assert sum(lot.counts.on_hand for lot in phil.lots) == 3 and sum(lot.counts.dispensed for lot in phil.lots) == 1
    assert {t["site"] for t in phil.tasks} == {SITE} and {t["site"] for t in sam.tasks} <= {OTHER_SITE}
    assert [link.unit.dispensing.patient.external_ref for link in phil.left] == ["SYN-SHELF"]
    assert sam.left == []


def test_the_page_of_site_b_shows_nothing_of_site_a(client, two_sites, people):
    client.force_login(people["staff"])
    page = client.get("/shelf/").content.decode()
    assert f"Shelf: {OTHER_SITE}" in page and 'data-site="Main St"' not in page
    assert "SYN-SHELF" not in page and "Synthetic Shelf Patient" not in page
    refused = client.get("/shelf/", {"site": SITE})
    assert refused.status_code == 400 and "“Main St” is not one of your sites" in refused.content.decode()
    assert 'data-site="Main St"' not in refused.content.decode()
    response, header, rows = _rows(client, "/shelf/stock.csv")
    assert response.status_code == 200 and header == site_shelf.STOCK_COLUMNS
    assert rows and {r[0] for r in rows} == {OTHER_SITE}
    assert client.get("/shelf/stock.csv", {"site": SITE}).status_code == 400


def test_the_pharmacists_page_lists_stock_quarantine_tasks_and_units_with_patients(client, two_sites, people):
    client.force_login(people["pharmacist"])
    page = client.get("/shelf/").content.decode()
    assert 'id="shelf-stock"' in page and 'data-n="on_hand">3<' in page and 'data-n="dispensed">1<' in page
    assert f'<tr data-recall="{RECALL}" data-site="{SITE}">' in page and "No statutory deadline" in page
    assert "Synthetic Shelf Patient (SYN-SHELF)" in page and 'data-serial="W000001"' in page
    assert "Nothing in quarantine." in page
    response, header, rows = _rows(client, f"/shelf/stock.csv?recall={RECALL}")
    assert [(r[0], r[4], r[7], r[9]) for r in rows] == [(SITE, d.LOSARTAN_LOT, "3", "1")]


def test_filters_by_recall_and_an_unknown_recall_is_refused(client, two_sites, people):
    client.force_login(people["pharmacist"])
    assert client.get("/shelf/", {"recall": RECALL}).status_code == 200
    refused = client.get("/shelf/", {"recall": "D-9999-2099"})
    assert refused.status_code == 400 and "No recall “D-9999-2099” has a shelf task" in refused.content.decode()


def test_someone_granted_no_site_is_told_so_and_sees_no_stock(client, shelf_world, people):  # noqa: F811
    client.force_login(people["pharmacist"])
    page = client.get("/shelf/").content.decode()
    assert 'id="no-sites"' in page and 'id="shelf-stock"' not in page
    assert site_shelf.site_shelf(people["pharmacist"]).lots == []


def test_an_operator_sees_every_site(client, two_sites, django_user_model):
    admin = django_user_model.objects.create_superuser("olga", password="pw")
    assert {lot.site for lot in site_shelf.site_shelf(admin).lots} == {SITE, OTHER_SITE}
    client.force_login(admin)
    assert client.get("/shelf/", {"site": OTHER_SITE}).status_code == 200


def test_only_pharmacists_and_staff_may_open_it(client, shelf_world, django_user_model):  # noqa: F811
    assert client.get("/shelf/").status_code == 302  # to the login page
    client.force_login(django_user_model.objects.create_user("nobody", password="pw"))
    assert client.get("/shelf/").status_code == 403
    assert client.get("/shelf/stock.csv").status_code == 403


def test_a_class_i_task_shows_its_due_date(client, two_sites, people):
    assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT, classification="Class I"), reason="escalated to Class I")
    (task,) = site_shelf.site_shelf(people["pharmacist"]).tasks
    assert task["classification"] == "Class I" and task["deadline"].state == "due"
    client.force_login(people["pharmacist"])
    assert 'data-deadline="due"' in client.get("/shelf/").content.decode()


def test_class_i_tasks_come_first_then_the_soonest_due():
    now = timezone.now()
    task = lambda number, klass, due: {"recall_number": number, "site": SITE, "classification": klass,  # noqa: E731
                                       "deadline": recall_list.Deadline("due" if due else "none", due)}
    tasks = [task("D-3", "Class II", None), task("D-2", "Class I", now + timedelta(days=9)),
             task("D-1", "Class I", now + timedelta(days=2))]
    assert [t["recall_number"] for t in sorted(tasks, key=site_shelf._task_order)] == ["D-1", "D-2", "D-3"]


def test_an_operator_grants_a_site_in_the_admin_and_a_blank_one_is_refused(client, shelf_world, people,  # noqa: F811
                                                                          django_user_model):
    from django.contrib.admin.models import LogEntry

    client.force_login(django_user_model.objects.create_superuser("olga", password="pw"))
    url = "/admin/shelf/staffsite/add/"
    refused = client.post(url, {"user": people["staff"].pk, "site": "  "})
    assert refused.status_code == 200 and "This field is required" in refused.content.decode()
    assert not StaffSite.objects.exists()
    assert client.post(url, {"user": people["staff"].pk, "site": SITE}).status_code == 302
    assert StaffSite.objects.get().site == SITE and LogEntry.objects.filter(object_repr__contains=SITE).exists()
    assert {lot.site for lot in site_shelf.site_shelf(people["staff"]).lots} == {SITE}
