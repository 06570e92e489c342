"""The recall page shows the shelf half beside the patient half; staff confirm quarantine and return in htmx
screens; a Class I shelf task carries the patient work's deadline; the report counts both halves.
Recall: REAL D-0502-2019. Shipment and patient: SYNTHETIC (tests/epcis_docs.py)."""

import pytest

from memory.fact_writes import assert_claim
from shelf.models import ShelfTask, Unit
from shelf.receiving import receive
from tests import epcis_docs as d
from tests.factories import make_patient, recall_claim

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]

RECALL, SITE = "D-0502-2019", "Main St"


@pytest.fixture
def shelf_world(shelf_match_runs_here):
    assert receive(d.shipment_xml(d.serials("W", 4)), site=SITE).applied == 3
    make_patient("SYN-SHELF", [{"drug": "losartan", "lot": d.LOSARTAN_LOT, "ndc": d.LOSARTAN_NDC,
                                "gtin": d.LOSARTAN_GTIN, "serial": "W000001", "site": SITE}],
                 name="Synthetic Shelf Patient", through_service=True)
    assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    return ShelfTask.objects.get()


def _login(client, people, who="pharmacist"):
    client.force_login(people[who])
    return client


def test_the_recall_page_shows_units_on_the_shelf_and_who_took_the_dispensed_one(client, people, shelf_world):
    page = _login(client, people).get(f"/worklist/recall/{RECALL}").content.decode()
    assert 'id="shelf"' in page and 'data-n="on_hand">3<' in page and 'data-n="dispensed">1<' in page
    assert "Synthetic Shelf Patient (SYN-SHELF)" in page and "Serial W000001" in page
    assert "data-shelf-deadline" not in page  # Class II: no statutory deadline


def test_quarantine_then_return_through_htmx(client, people, shelf_world):
    c = _login(client, people)
    url = f"/worklist/shelf/{shelf_world.public_id}/quarantine/"
    response = c.post(url, {"counted": "3"}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and b"<html" not in response.content
    assert b'data-n="quarantined">3<' in response.content and b"Quarantine confirmed" in response.content
    response = c.post(f"/worklist/shelf/{shelf_world.public_id}/return/", {"counted": "3", "note": "RA 1234"},
                      headers={"HX-Request": "true"})
    assert b'data-n="returned">3<' in response.content
    assert Unit.objects.filter(state="returned").count() == 3


def test_without_htmx_the_forms_redirect_back_to_the_recall(client, people, shelf_world):
    response = _login(client, people).post(f"/worklist/shelf/{shelf_world.public_id}/quarantine/", {"counted": "3"})
    assert response.status_code == 302 and response["Location"].endswith(f"/worklist/recall/{RECALL}")


def test_a_bad_count_or_a_return_before_quarantine_is_refused(client, people, shelf_world):
    c = _login(client, people)
    assert c.post(f"/worklist/shelf/{shelf_world.public_id}/quarantine/", {"counted": "-1"},
                  headers={"HX-Request": "true"}).status_code == 400
    response = c.post(f"/worklist/shelf/{shelf_world.public_id}/return/", {"counted": "3"},
                      headers={"HX-Request": "true"})
    assert response.status_code == 409 and b"Confirm the quarantine first" in response.content
    assert Unit.objects.filter(state="on_hand").count() == 3


def test_staff_without_review_rights_cannot_confirm(client, people, shelf_world):
    response = _login(client, people, "staff").post(f"/worklist/shelf/{shelf_world.public_id}/quarantine/",
                                                    {"counted": "3"})
    assert response.status_code in (302, 403)
    assert Unit.objects.filter(state="quarantined").count() == 0


def test_a_class_i_shelf_task_has_the_patient_works_deadline(client, people, shelf_world):
    assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT, classification="Class I"), reason="escalated to Class I")
    page = _login(client, people).get(f"/worklist/recall/{RECALL}").content.decode()
    assert 'data-shelf-deadline="due"' in page and 'data-deadline="due"' in page
    from worklist.shelf import shelf_half

    (row,) = shelf_half(RECALL)
    from worklist import recall_pages

    assert row.deadline.due_at == recall_pages.recall_page(RECALL).deadline.due_at


def test_the_report_counts_the_shelf_beside_the_patients(client, people, shelf_world):
    page = _login(client, people).get(f"/worklist/report/{RECALL}").content.decode()
    assert 'id="shelf-received">4 at 1 site' in page and 'id="shelf-on-hand">3<' in page
    assert 'id="shelf-dispensed">1 (1)<' in page


def test_the_worklist_home_lists_recalled_units_still_on_a_shelf(client, people, shelf_world):
    c = _login(client, people)
    page = c.get("/worklist/").content.decode()
    assert 'id="shelf-tasks"' in page and f'data-recall="{RECALL}" data-site="{SITE}"' in page
    c.post(f"/worklist/shelf/{shelf_world.public_id}/quarantine/", {"counted": "3"})
    c.post(f"/worklist/shelf/{shelf_world.public_id}/return/", {"counted": "3"})
    assert 'id="shelf-tasks"' not in c.get("/worklist/").content.decode()


def test_the_admin_lists_units_events_and_tasks_read_only(admin_client, shelf_world):
    for model in ("unit", "receivedevent", "shelftask", "shelfevent"):
        response = admin_client.get(f"/admin/shelf/{model}/")
        assert response.status_code == 200, model
    assert b"W000002" in admin_client.get("/admin/shelf/unit/?q=W000002").content
    assert admin_client.get("/admin/shelf/unit/add/").status_code == 403


def test_units_arriving_after_a_return_reopen_the_shelf_task(client, people, shelf_world):
    c = _login(client, people)
    c.post(f"/worklist/shelf/{shelf_world.public_id}/quarantine/", {"counted": "3"})
    c.post(f"/worklist/shelf/{shelf_world.public_id}/return/", {"counted": "3"})
    assert receive(d.shipment_xml(d.serials("X", 2), case=5), site=SITE).applied == 3  # a late delivery
    assert f'data-recall="{RECALL}" data-site="{SITE}"' in c.get("/worklist/").content.decode()
    c.post(f"/worklist/shelf/{shelf_world.public_id}/quarantine/", {"counted": "2"})
    page = c.get(f"/worklist/recall/{RECALL}").content.decode()
    assert 'name="return"' in page and 'data-n="quarantined">2<' in page
    c.post(f"/worklist/shelf/{shelf_world.public_id}/return/", {"counted": "2"})
    assert Unit.objects.filter(state="returned").count() == 5
