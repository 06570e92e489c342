"""corrections.transitions: one table of which status may follow which, checked before every write."""

import pytest

from corrections import transitions
from corrections.models import Correction, OutboxMessage
from corrections.review import approve, reject
from tests.test_corrections_review import drafts, people  # noqa: F401 (fixtures)
from tests.test_sweep import dispatch_not_enqueued, no_auto_sweep, world  # noqa: F401 (fixtures)


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
def test_a_rejected_correction_cannot_then_be_approved(people, drafts):  # noqa: F811
    draft = drafts["SYN-A"]
    reject(draft.pk, user=people["pharmacist"], reason="wrong patient")
    with pytest.raises(Exception, match="rejected|no longer|not a draft|cannot"):
        approve(draft.pk, user=people["pharmacist"])
    draft.refresh_from_db()
    assert draft.status == Correction.Status.REJECTED
