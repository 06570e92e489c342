"""corrections.transitions: one table of which status may follow which, checked before every write."""

import pytest

from corrections import transitions
from corrections.models import Correction, OutboxMessage
from corrections.review import approve, reject

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = pytest.mark.usefixtures("dispatch_not_enqueued")

@pytest.mark.parametrize("model", [Correction, OutboxMessage])
def test_the_table_names_every_status_and_only_real_ones(model):
    table = transitions.TABLES[model]
    statuses = set(model.Status.values)
    assert set(table) == statuses
    assert set().union(*table.values()) <= statuses


def test_finished_states_go_nowhere_and_nothing_goes_back_to_a_draft():
    for final in (Correction.Status.SENT, Correction.Status.REJECTED, Correction.Status.STALE):
        assert transitions.CORRECTION[final] == set()
    assert transitions.sources(Correction, Correction.Status.DRAFT) == []
    assert transitions.sources(OutboxMessage, OutboxMessage.Status.HELD) == []
    with pytest.raises(transitions.InvalidTransition, match="from 'sent' to 'ready'"):
        transitions.check(OutboxMessage, OutboxMessage.Status.SENT, OutboxMessage.Status.READY)


@pytest.mark.django_db(transaction=True)
def test_a_rejected_correction_cannot_then_be_approved(people, drafts):
    draft = drafts["SYN-A"]
    reject(draft.pk, user=people["pharmacist"], reason="wrong patient")
    with pytest.raises(Exception, match="rejected|no longer|not a draft|cannot"):
        approve(draft.pk, user=people["pharmacist"])
    draft.refresh_from_db()
    assert draft.status == Correction.Status.REJECTED
