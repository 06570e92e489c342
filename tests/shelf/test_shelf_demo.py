"""manage.py demo_shelf over the demo's real recall D-0326-2019 (lot 3069020) and its synthetic patients."""

import pytest
from django.core.management import call_command

from demo.patients import DEMO_RECALL_NUMBER, DEMO_SITE, seed_demo
from memory.fact_writes import assert_claim
from shelf.models import Unit
from shelf.selectors import recall_shelf
from tests.factories import recall_claim

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


def test_the_demo_receives_a_shipment_scans_three_fills_and_shows_both_halves(capsys):
    assert_claim(recall_claim(DEMO_RECALL_NUMBER, "3069020"))
    seed_demo()
    call_command("demo_shelf")
    call_command("demo_shelf")  # again: nothing received or scanned twice
    out = capsys.readouterr().out
    assert "2 event(s) applied" in out and "2 already received" in out and "0 fill(s) recorded" in out
    (view,) = recall_shelf(DEMO_RECALL_NUMBER)
    c = view.counts
    assert (view.task.site, c.received, c.on_hand, c.dispensed) == (DEMO_SITE, 12, 9, 3)
    assert sorted(u.dispensing.patient.external_ref for u in view.dispensed) == [
        "DEMO-EXPOSED-01", "DEMO-EXPOSED-02", "DEMO-EXPOSED-03"]
    assert Unit.objects.filter(lot="3095511", state="on_hand").count() == 6  # the unrecalled lot stays
