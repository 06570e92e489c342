"""The sweep writes a read set only when its content is new (ADR 0016): patients who hold the same lot
and asked alike are re-decided onto one set, on the set-based page and the per-decision path alike, and
each new decision's set is exactly what a fresh decision reads. Real recall facts, synthetic patients."""

import pytest

from ask.services import decide
from corrections.sweep.run import sweep
from memory.models import Decision, ReadSetMember
from patients.selectors import attach_patients
from tests.factories import escalate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


@pytest.mark.parametrize("set_based", [True, False])
def test_redecisions_that_read_alike_share_one_set_and_read_exactly_what_a_fresh_decision_reads(
        world, no_auto_sweep, monkeypatch, set_based):
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_SET_BASED", set_based)
    a, b = world["decisions"]["a"], world["decisions"]["b"]
    assert a.read_set_id == b.read_set_id  # asked alike about the same lot: one set already
    members_before = ReadSetMember.objects.count()
    escalate()
    report = sweep()
    assert (report.set_pages > 0) is set_based
    new_a, new_b = (Decision.objects.get(replaces=d) for d in (a, b))
    assert new_a.read_set_id == new_b.read_set_id != a.read_set_id
    written = ReadSetMember.objects.count() - members_before
    assert written == new_a.reads.count() > 0  # one set's members for two re-decisions, not one per decision
    for decision in attach_patients(Decision.objects.standing().filter(replaces__isnull=False)):
        fresh = decide(decision.patient, decision.question, subject=decision.subject or None)
        assert [(r.fact_id, r.fact_key, r.fact_version, r.rank, r.score, r.load_bearing) for r in decision.reads] == [
            (s.fact.id, s.fact.fact_key, s.fact.version, s.rank, s.score, s.load_bearing) for s in fresh.read_specs()]
