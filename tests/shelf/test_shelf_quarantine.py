"""A recall reaches the shelf, and a scan at fill ties a unit to its patient. The recall is the REAL record
D-0502-2019 (losartan 50 mg, NDC 13668-409-30, lot 4L67C035); shipments and patients are SYNTHETIC."""

import pytest

from memory.fact_writes import assert_claim
from shelf import quarantine, tasks
from shelf.models import ShelfEvent, ShelfTask, Unit
from shelf.receiving import receive
from shelf.selectors import recall_shelf, recall_shelf_summary, recalled_units_on_hand
from tests import epcis_docs as d
from tests.factories import make_patient, recall_claim

# Facts are written in their own transactions; each shelf match they queue runs here as a worker would.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("shelf_match_runs_here")]

SITE, RECALL = "Main St", "D-0502-2019"


@pytest.fixture
def pharmacist(django_user_model):
    return django_user_model.objects.create_user("synthetic-pharmacist", password="x")


def _receive(doc, site=SITE):
    receipt = receive(doc, site=site)
    assert receipt.ok and not receipt.refused, receipt.refused
    return receipt


def _stock(capture):
    with capture(execute=True):
        _receive(d.shipment_xml(d.serials("R", 5)))
        _receive(d.shipment_xml(d.serials("K", 2), lot=d.OTHER_LOT, case=2))


def _scan_fill(serial, ref="P1", site=SITE):
    """A fill whose pack was scanned: the row carries the DataMatrix's GTIN and serial (patients.scanning)."""
    return make_patient(ref, [{"drug": "losartan", "lot": d.LOSARTAN_LOT, "ndc": d.LOSARTAN_NDC,
                               "gtin": d.LOSARTAN_GTIN, "serial": serial, "site": site, "quantity": 30}],
                        through_service=True).dispensings.get()


def _counts(site=SITE):
    (view,) = [v for v in recall_shelf(RECALL) if v.task.site == site]
    return view, view.counts


def test_a_scan_at_fill_decommissions_the_serial_and_ties_it_to_the_patient(django_capture_on_commit_callbacks):
    _stock(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        row = _scan_fill("R000001")
    unit = Unit.objects.get(serial="R000001")
    assert (unit.state, unit.dispensing_id) == ("dispensed", row.id)
    assert ShelfEvent.objects.filter(action="scanned").count() == 1


def test_a_new_recall_makes_a_quarantine_task_of_the_matching_units(django_capture_on_commit_callbacks):
    _stock(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        _scan_fill("R000001")
    with django_capture_on_commit_callbacks(execute=True):
        assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    view, c = _counts()
    assert (c.received, c.on_hand, c.dispensed, c.quarantined, c.returned) == (5, 4, 1, 0, 0)
    assert view.by_class == {"confirmed": 5}
    assert [u.dispensing.patient.external_ref for u in view.dispensed] == ["P1"]
    assert recalled_units_on_hand() == {RECALL: 4}


def test_a_fact_change_queues_shelf_matching_and_the_writer_links_nothing(django_capture_on_commit_callbacks,
                                                                         monkeypatch):
    """The receiver only announces work: the writer's commit queues one task with the new versions; the
    units are linked when a worker runs it."""
    _stock(django_capture_on_commit_callbacks)
    queued = []
    monkeypatch.setattr(tasks.match_recall_facts, "delay", queued.append)  # the worker is elsewhere
    with django_capture_on_commit_callbacks(execute=True):
        fact = assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT)).fact
    assert queued == [[fact.id]]
    assert not ShelfTask.objects.exists()
    assert tasks.match_recall_facts.apply(args=(queued[0],)).get() == f"facts [{fact.id}]: 1 shelf tasks touched"
    _view, c = _counts()
    assert (c.received, c.on_hand) == (5, 5)


def test_a_broker_that_is_down_leaves_the_write_standing(django_capture_on_commit_callbacks, monkeypatch):
    _stock(django_capture_on_commit_callbacks)

    def down(fact_ids):
        raise ConnectionError("broker down")

    monkeypatch.setattr(tasks.match_recall_facts, "delay", down)
    with django_capture_on_commit_callbacks(execute=True):
        fact = assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT)).fact
    assert fact.pk and not ShelfTask.objects.exists()  # `manage.py shelf_match` links them later


def test_units_received_after_the_recall_join_its_task(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    assert not ShelfTask.objects.exists()
    _stock(django_capture_on_commit_callbacks)
    _view, c = _counts()
    assert (c.received, c.on_hand) == (5, 5)


def test_an_escalation_keeps_one_task_and_links_nothing_twice(django_capture_on_commit_callbacks):
    _stock(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    with django_capture_on_commit_callbacks(execute=True):
        assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT, classification="Class I"), reason="escalated")
    assert ShelfTask.objects.count() == 1
    assert ShelfEvent.objects.filter(action="matched").count() == 2
    _view, c = _counts()
    assert c.received == 5


def test_a_second_confirmation_keeps_the_first_ones_time_and_person_and_adds_its_count(
        django_capture_on_commit_callbacks, people, pharmacist):
    """Units received after the quarantine was confirmed are matched and pulled later: the Class I deadline
    was met (or missed) when the quarantine was first confirmed, and the task counts every unit counted."""
    with django_capture_on_commit_callbacks(execute=True):
        _receive(d.shipment_xml(d.serials("R", 3)))
        assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    task = ShelfTask.objects.get()
    assert quarantine.confirm_quarantine(task, counted=3, user=pharmacist) == 3
    task.refresh_from_db()
    first_at = task.quarantined_at
    with django_capture_on_commit_callbacks(execute=True):
        _receive(d.shipment_xml(d.serials("N", 2), case=3))
    _view, c = _counts()
    assert (c.on_hand, c.quarantined) == (2, 3)
    staff = people["staff"]
    assert quarantine.confirm_quarantine(task, counted=2, user=staff) == 2
    task.refresh_from_db()
    assert (task.quarantined_at, task.quarantined_by, task.quarantine_count) == (first_at, pharmacist, 5)
    assert quarantine.confirm_return(task, counted=4, user=pharmacist) == 5
    assert quarantine.confirm_return(task, counted=1, user=staff) == 0
    task.refresh_from_db()
    assert (task.returned_by, task.return_count) == (pharmacist, 5)
    assert list(ShelfEvent.objects.filter(action__in=["quarantined", "returned"]).order_by("id")
                .values_list("action", "actor_label", "details__counted")) == [
        ("quarantined", pharmacist.get_username(), 3), ("quarantined", staff.get_username(), 2),
        ("returned", pharmacist.get_username(), 4), ("returned", staff.get_username(), 1)]


def test_a_recall_that_says_destroy_is_confirmed_as_destroyed_from_quarantine_only(
        django_capture_on_commit_callbacks, client, people):
    with django_capture_on_commit_callbacks(execute=True):
        _receive(d.shipment_xml(d.serials("R", 3)))
        assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    task = ShelfTask.objects.get()
    pharmacist = people["pharmacist"]
    with pytest.raises(quarantine.ShelfError, match="Confirm the quarantine first"):
        quarantine.confirm_destruction(task, counted=3, user=pharmacist)
    assert set(Unit.objects.values_list("state", flat=True)) == {"on_hand"}
    assert quarantine.confirm_quarantine(task, counted=3, user=pharmacist) == 3
    client.force_login(pharmacist)
    url = f"/worklist/shelf/{task.public_id}/destroy/"
    panel = client.get(f"/worklist/recall/{RECALL}").content.decode()
    assert "Confirm destruction" in panel
    assert client.post(url, {"counted": ""}, headers={"HX-Request": "true"}).status_code == 400
    answer = client.post(url, {"counted": "3", "note": "denatured, witnessed by sam"}, headers={"HX-Request": "true"})
    assert answer.status_code == 200
    assert set(Unit.objects.values_list("state", flat=True)) == {"destroyed"}
    task.refresh_from_db()
    assert (task.destroyed_by, task.destroy_count, task.returned_at) == (pharmacist, 3, None)
    assert "Destruction confirmed by phil" in answer.content.decode()
    (event,) = ShelfEvent.objects.filter(action="destroyed")
    assert event.details == {"expected": 3, "counted": 3, "note": "denatured, witnessed by sam"}
    summary = recall_shelf_summary(RECALL)
    assert (summary["destroyed"], summary["returned"], summary["quarantined"]) == (3, 0, 0)
    # Destroyed is final: nothing returns it, and staff without the reviewer role cannot confirm one.
    assert quarantine.confirm_return(task, counted=0, user=pharmacist) == 0
    assert set(Unit.objects.values_list("state", flat=True)) == {"destroyed"}
    client.force_login(people["staff"])
    assert client.post(url, {"counted": "0"}, headers={"HX-Request": "true"}).status_code in (302, 403)


def test_an_all_lots_recall_matches_every_lot_of_the_product(django_capture_on_commit_callbacks):
    _stock(django_capture_on_commit_callbacks)
    fact = assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT)).fact
    # The same real record read as an all-lots recall (its drug-level claim shape): scope "drug", no lot.
    fact.lot, fact.attributes = None, {**fact.attributes, "scope": "drug", "lot_scope": None}
    assert {u.serial[0] for u in Unit.objects.all() if quarantine.unit_match(fact, u)} == {"R", "K"}


def test_quarantine_and_return_are_confirmed_with_counts_and_add_up(django_capture_on_commit_callbacks, pharmacist):
    _stock(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        _scan_fill("R000001")
        assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    task = ShelfTask.objects.get()
    with pytest.raises(quarantine.ShelfError):
        quarantine.confirm_return(task, counted=4, user=pharmacist)
    assert quarantine.confirm_quarantine(task, counted=4, user=pharmacist) == 4
    _view, c = _counts()
    assert (c.on_hand, c.quarantined) == (0, 4)
    assert recalled_units_on_hand() == {}
    assert quarantine.confirm_return(task, counted=3, user=pharmacist, note="one bottle missing") == 4
    task.refresh_from_db()
    assert (task.quarantine_count, task.return_count) == (4, 3)
    summary = recall_shelf_summary(RECALL)
    assert summary["received"] == summary["on_hand"] + summary["quarantined"] + summary["dispensed"] \
        + summary["returned"] + summary["destroyed"] == 5
    assert (summary["returned"], summary["dispensed_to_known_patient"]) == (4, 1)
    assert list(ShelfEvent.objects.filter(action__in=["quarantined", "returned"])
                .values_list("details__counted", flat=True)) == [4, 3]
    # The other lot stays on the shelf, out of the recall.
    assert Unit.objects.filter(lot=d.OTHER_LOT.replace("-", ""), state="on_hand").count() == 2


def test_shelf_match_links_again_what_a_failed_run_missed(django_capture_on_commit_callbacks, capsys):
    from django.core.management import call_command

    from shelf.models import TaskUnit

    _stock(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    TaskUnit.objects.all().delete()  # as if matching had failed after the recall was written
    call_command("shelf_match", "--recall", RECALL)
    assert "1 recall facts matched" in capsys.readouterr().out
    _view, c = _counts()
    assert (c.received, c.on_hand) == (5, 5)
    call_command("shelf_match")  # idempotent
    assert TaskUnit.objects.count() == 5


def test_an_escalation_makes_the_task_when_the_first_version_made_none(django_capture_on_commit_callbacks,
                                                                       monkeypatch):
    """The Class II version was written while shelf matching failed (it is logged, the ingest stands); the
    escalation's new version makes the task, and the task then has the Class I deadline."""
    _stock(django_capture_on_commit_callbacks)
    with monkeypatch.context() as m:
        m.setattr(quarantine, "match_facts", lambda ids: 1 / 0)
        with django_capture_on_commit_callbacks(execute=True):
            assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    assert not ShelfTask.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT, classification="Class I"), reason="escalated")
    _view, c = _counts()
    assert (c.received, c.on_hand) == (5, 5)
    from worklist.shelf import shelf_half

    assert shelf_half(RECALL)[0].deadline.state == "due"


def test_an_expiry_window_limits_an_all_lots_recall(django_capture_on_commit_callbacks):
    _stock(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        _receive(d.shipment_xml(d.serials("Z", 2), lot="4L99Z001", expiry="2021-03-31", case=3))
    fact = assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT)).fact
    # The real record read as 'all lots expiring 01/2019 to 12/2019' (the shape recalls.lots gives such text).
    fact.lot = None
    fact.attributes = {**fact.attributes, "scope": "drug",
                       "lot_scope": {"kind": "all_lots_window", "expiry_window": ["2019-01", "2019-12"]}}
    matched = {u.serial[0] for u in Unit.objects.all() if quarantine.unit_match(fact, u)}
    assert matched == {"R", "K"}  # the 2021 lot is outside the window


def test_a_unit_whose_ndc_hyphenation_is_unconfirmed_matches_at_most_probably(django_capture_on_commit_callbacks):
    epcs = d.units(d.LOSARTAN_GTIN, d.serials("U", 1))
    with django_capture_on_commit_callbacks(execute=True):  # no master data, no recall or fill knows the product
        _receive(d.json_document([d.json_event("ObjectEvent", epcs=epcs, step="receiving", lot=d.LOSARTAN_LOT)],
                                 master=False))
    unit = Unit.objects.get()
    assert unit.ndc == "" and "13668-0409" in unit.ndc_products
    fact = assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT)).fact
    found = quarantine.unit_match(fact, unit)
    assert found.klass == "probable" and "hyphenation unconfirmed" in found.rule
    (view,) = recall_shelf(RECALL)
    assert view.by_class == {"probable": 1}
