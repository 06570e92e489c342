"""The triggered stale set reads only what can be stale (corrections.sweep.staleness.Scope): the reads of the
changed facts that are retracted, never those of the changed facts still believed (a new recall's
facts, an escalation's new version), whose readers are the sweep's own new decisions. The stale set
it finds is the one the unrestricted query finds. Real openFDA recall facts (tests/factories.py),
synthetic patients."""

import pytest

from ask.services import ask
from corrections.sweep import staleness
from corrections.sweep.staleness import NEW_FACT, RETRACTED_READ, Scope
from memory.fact_writes import assert_claim
from memory.models import Decision
from tests.factories import LOT, RECALL, VALSARTAN, make_patient, recall_claim

pytestmark = pytest.mark.django_db(transaction=True)

NEW_RECALL, NEW_LOT = "D-0326-2019", "3069020"  # real; asserted after the patients asked


def _unrestricted(scope: Scope) -> Scope:
    """The same scope with no retracted-fact lookup: the retracted-read branch over every changed fact."""
    return Scope(scope.fact_ids, scope.patient_ids)


def _world():
    old = assert_claim(recall_claim(RECALL, LOT)).fact
    patients = [make_patient(f"SYN-SC{n}", [(VALSARTAN, lot)]) for n, lot in enumerate([LOT, NEW_LOT, "3095511"])]
    decisions = [ask(p, "Is my valsartan safe?") for p in patients]
    return old, decisions


def test_a_new_recall_scope_has_no_retracted_read_branch_and_finds_the_same_stale_set(hashing_embeddings):
    _, decisions = _world()
    new = assert_claim(recall_claim(NEW_RECALL, NEW_LOT)).fact

    scope = Scope.of([new.id])

    assert scope.retracted_fact_ids == ()
    assert scope.branches() == [NEW_FACT]
    found = staleness.all_stale_ids(scope)
    assert found and found == staleness.all_stale_ids(_unrestricted(scope))
    assert staleness.stale_decision_ids(scope=scope) == staleness.stale_decision_ids(scope=_unrestricted(scope))
    assert staleness.stale_reasons([d.id for d in decisions], scope) == staleness.stale_reasons(
        [d.id for d in decisions], _unrestricted(scope))


def test_an_escalation_scope_reads_only_the_retracted_version(hashing_embeddings):
    old, decisions = _world()
    result = assert_claim(recall_claim(RECALL, LOT, classification="Class I"))
    assert result.fact.version == old.version + 1

    scope = Scope.of([old.id, result.fact.id])

    assert scope.retracted_fact_ids == (old.id,)
    assert scope.branches() == [RETRACTED_READ, NEW_FACT]
    _, params = staleness._retracted_read(scope, None, "TRUE")
    assert [old.id] in params and [old.id, result.fact.id] not in params
    found = staleness.all_stale_ids(scope)
    assert decisions[0].id in found
    assert found == staleness.all_stale_ids(_unrestricted(scope))
    assert staleness.stale_reasons([d.id for d in decisions], scope) == staleness.stale_reasons(
        [d.id for d in decisions], _unrestricted(scope))


def test_the_keyset_page_past_the_stale_set_is_the_same_with_one_branch_or_two(hashing_embeddings):
    _, decisions = _world()
    new = assert_claim(recall_claim(NEW_RECALL, NEW_LOT)).fact
    scope = Scope.of([new.id])
    first = min(d.id for d in decisions) - 1

    for after in (0, first, max(d.id for d in decisions)):
        assert (staleness.stale_decision_ids(after=after, limit=1, scope=scope)
                == staleness.stale_decision_ids(after=after, limit=1, scope=_unrestricted(scope)))


def test_any_stale_says_whether_the_stale_set_is_empty_in_every_state(hashing_embeddings):
    """The triggers' pre-check (staleness.any_stale, which stops at the first row) against the set itself."""
    from corrections.sweep.run import sweep

    old, decisions = _world()
    patient_scope = Scope.of(None, [decisions[0].patient_id])
    assert not staleness.any_stale(Scope.of([old.id])) and not staleness.all_stale_ids(Scope.of([old.id]))
    assert not staleness.any_stale(patient_scope)

    new = assert_claim(recall_claim(NEW_RECALL, NEW_LOT)).fact
    escalated = assert_claim(recall_claim(RECALL, LOT, classification="Class I")).fact
    scopes = [Scope.of([new.id]), Scope.of([old.id, escalated.id]), Scope.of([new.id, old.id, escalated.id]), Scope()]
    for scope in scopes:
        assert staleness.all_stale_ids(scope), scope
        assert staleness.any_stale(scope), scope

    sweep(fact_ids=[new.id, old.id, escalated.id])
    for scope in scopes:
        assert not staleness.all_stale_ids(scope), scope
        assert not staleness.any_stale(scope), scope


def _pairs(sql: str, params: list) -> set[tuple[int, int]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT decision_id, fact_id FROM ({sql}) AS branch", params)
        return set(cursor.fetchall())


def test_the_pre_checks_new_fact_form_finds_the_same_pairs_as_the_joined_form(hashing_embeddings):
    """any_stale reads the new-fact branch premise set by premise set (the form that stops at the first
    stale decision at any size); it must find exactly the decisions the joined form finds, each with a fact
    it did not read, before and after a sweep, from any keyset position."""
    from corrections.sweep.run import sweep

    old, decisions = _world()
    new = assert_claim(recall_claim(NEW_RECALL, NEW_LOT)).fact
    escalated = assert_claim(recall_claim(RECALL, LOT, classification="Class I")).fact
    scopes = [Scope.of([new.id]), Scope.of([old.id, escalated.id]), Scope.of([new.id, old.id, escalated.id])]
    ids = sorted(d.id for d in decisions)

    def compare():
        for scope in scopes:
            for after in (0, ids[0], ids[-1]):
                for standing in ("d.status = 'standing'", "TRUE"):
                    joined = _pairs(*staleness._new_fact(scope, None, standing, after))
                    probed = _pairs(*staleness._new_fact_probe(scope, standing, after))
                    # The same decisions, each with one of the facts it did not read.
                    assert {d for d, _ in probed} == {d for d, _ in joined}, (scope, after, standing)
                    assert probed <= joined and len(probed) == len({d for d, _ in probed}), (scope, after)

    standing = "d.status = 'standing'"
    compare()
    assert any(_pairs(*staleness._new_fact_probe(scope, standing, 0)) for scope in scopes)
    assert all("read_all" in staleness._union(scope, probe=True)[0] for scope in scopes)  # any_stale's form
    sweep(fact_ids=[new.id, old.id, escalated.id])
    compare()
    assert not any(_pairs(*staleness._new_fact_probe(scope, standing, 0)) for scope in scopes)
    # Superseded decisions still read as the joined form reads them (standing_only=False callers).
    assert _pairs(*staleness._new_fact_probe(scopes[0], "TRUE", 0))


def test_a_decision_that_read_one_of_two_new_lots_is_stale_in_both_forms(hashing_embeddings):
    """Two lots of one real recall and a patient whose valsartan was dispensed with no lot recorded (they
    rest on every lot of it): they asked after the first lot was believed (their answer read it), then the
    second arrives. Scoped to both, the pre-check's form must still find them (they did not read the
    second), as the joined form does."""
    first = assert_claim(recall_claim(NEW_RECALL, NEW_LOT)).fact
    patient = make_patient("SYN-SC-TWO", [{"drug": VALSARTAN, "lot": "", "lot_unknown": True}])
    decision = ask(patient, "Is my valsartan safe?")
    second = assert_claim(recall_claim(NEW_RECALL, "3069021")).fact
    scope = Scope.of([first.id, second.id])
    standing = "d.status = 'standing'"

    joined = _pairs(*staleness._new_fact(scope, None, standing, 0))
    probed = _pairs(*staleness._new_fact_probe(scope, standing, 0))

    assert (decision.id, first.id) not in joined and (decision.id, second.id) in joined
    assert probed == {(decision.id, second.id)} == {pair for pair in joined if pair[0] == decision.id}
    assert staleness.any_stale(scope)

    # A decision that read nothing (no read set) did not read either, even where another's read set read both.
    later = ask(make_patient("SYN-SC-LATER", [{"drug": VALSARTAN, "lot": "", "lot_unknown": True}]),
                "Is my valsartan safe?")
    assert {first.id, second.id} <= set(later.read_set.members.values_list("fact_id", flat=True))
    Decision.objects.filter(pk=decision.pk).update(read_set=None)
    joined = _pairs(*staleness._new_fact(scope, None, standing, 0))
    probed = _pairs(*staleness._new_fact_probe(scope, standing, 0))
    assert {(decision.id, first.id), (decision.id, second.id)} <= joined
    assert (decision.id, first.id) in probed
