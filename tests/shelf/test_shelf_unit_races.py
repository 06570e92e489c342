"""A pharmacist's quarantine racing an EPCIS return or a scan at fill for the same units, in real processes on the
real database: whichever lands first, the other is checked against the state it finds, so a quarantined unit is
never shipped or dispensed. The test holds the units' rows locked, starts the two writers one after the other,
waits until both wait on those locks (in that order), then lets them go.

Recall: REAL D-0502-2019 (losartan 50 mg, NDC 13668-409-30, lot 4L67C035); shipment and patient SYNTHETIC."""

import time
from datetime import UTC, datetime

import psycopg
import pytest
from django.db import connection

from memory.fact_writes import assert_claim
from patients.models import DispensingRecord
from shelf.models import ReceivedEvent, ShelfEvent, ShelfTask, Unit
from shelf.receiving import receive
from tests import epcis_docs as d
from tests.factories import make_patient, recall_claim
from tests.procs import start_python

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("shelf_match_runs_here")]

SITE, RECALL = "Main St", "D-0502-2019"
SERIALS = d.serials("R", 4)

QUARANTINE = """
from django.contrib.auth import get_user_model
from shelf import quarantine
from shelf.models import ShelfTask
user = get_user_model().objects.get(username="synthetic-pharmacist")
print(quarantine.confirm_quarantine(ShelfTask.objects.get(), counted=4, user=user))
"""

SHIP = """
from shelf.receiving import receive
receipt = receive(open({path!r}, "rb").read(), site="Main St")
print(receipt.applied, receipt.refused_total)
"""

SCAN = """
from patients.models import DispensingRecord
from shelf.scans import link_scanned
print(link_scanned([DispensingRecord.objects.get(serial="R000001")]))
"""


@pytest.fixture
def task(django_user_model):
    django_user_model.objects.create_user("synthetic-pharmacist", password="x")
    assert receive(d.shipment_xml(SERIALS), site=SITE).applied == 3
    assert_claim(recall_claim(RECALL, d.LOSARTAN_LOT))
    return ShelfTask.objects.get()


def _waiting() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0]


def _race(first: str, second: str) -> tuple[str, str]:
    """Run two writers against the units held locked: `first` queues on the locks before `second`."""
    s = connection.settings_dict
    holder = psycopg.connect(host=s["HOST"], port=s["PORT"], user=s["USER"], dbname=s["NAME"])
    children = []
    try:
        holder.execute("SELECT id FROM shelf_unit WHERE serial = ANY(%s) ORDER BY id FOR UPDATE", [SERIALS])
        for n, code in enumerate((first, second), start=1):
            children.append(start_python(code))
            deadline = time.monotonic() + 60
            while _waiting() < n:
                assert time.monotonic() < deadline, children[-1].stderr.read() if children[-1].poll() else "stuck"
                time.sleep(0.05)
    finally:
        holder.rollback()
        holder.close()
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err[-3000:]
        outputs.append(out.strip().splitlines()[-1])
    return outputs[0], outputs[1]


def _states() -> set[str]:
    return set(Unit.objects.filter(serial__in=SERIALS).values_list("state", flat=True))


def _return_document(tmp_path) -> str:
    path = tmp_path / "return.json"
    path.write_bytes(d.json_document([d.json_event("ObjectEvent", epcs=d.units(d.LOSARTAN_GTIN, SERIALS),
                                                   step="shipping", action="OBSERVE")]))
    return str(path)


def test_a_quarantine_confirmed_first_refuses_the_shipping_event_that_waited_for_it(task, tmp_path):
    moved, receipt = _race(QUARANTINE, SHIP.format(path=_return_document(tmp_path)))
    assert (moved, receipt) == ("4", "0 1")
    assert _states() == {"quarantined"}
    assert f"quarantined for recall {RECALL}" in ReceivedEvent.objects.get(status="refused").reason


def test_a_return_shipped_first_leaves_the_quarantine_nothing_to_move(task, tmp_path):
    receipt, moved = _race(SHIP.format(path=_return_document(tmp_path)), QUARANTINE)
    assert (receipt, moved) == ("1 0", "0")
    assert _states() == {"returned"}
    assert ShelfEvent.objects.get(action="quarantined").details["expected"] == 0


def _scanned_fill():
    patient = make_patient("SYN-RACE")
    # Saved without the dispensing signal, so the link is made by the racing process alone.
    DispensingRecord.objects.create(patient=patient, drug="losartan", lot=d.LOSARTAN_LOT, ndc=d.LOSARTAN_NDC,
                                    gtin=d.LOSARTAN_GTIN, serial="R000001", site=SITE, quantity=30,
                                    dispensed_at=datetime(2019, 1, 14, tzinfo=UTC))


def test_a_quarantine_confirmed_first_refuses_the_scan_at_fill_that_waited_for_it(task):
    _scanned_fill()
    moved, linked = _race(QUARANTINE, SCAN)
    assert (moved, linked) == ("4", "0")
    assert _states() == {"quarantined"} and not Unit.objects.filter(dispensing__isnull=False).exists()
    assert ShelfEvent.objects.get(action="scan_refused").recall_number == RECALL


def test_a_scan_at_fill_first_takes_its_unit_out_of_the_quarantine(task):
    _scanned_fill()
    linked, moved = _race(SCAN, QUARANTINE)
    assert (linked, moved) == ("1", "3")
    unit = Unit.objects.get(serial="R000001")
    assert unit.state == "dispensed" and unit.dispensing.patient.external_ref == "SYN-RACE"
    assert Unit.objects.filter(state="quarantined").count() == 3
