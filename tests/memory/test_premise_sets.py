"""Premise sets (memory.premise_sets, ADR 0018): the scopes a decision rests on, stored once by their content."""

import importlib
import random

import pytest
from django.db import IntegrityError, connection
from django.db.migrations.executor import MigrationExecutor

from core.retry import run_in_transaction
from memory import premise_sets
from memory.decisions import record_decision
from memory.models import Decision, PremiseSet, PremiseSetMember

pytestmark = pytest.mark.django_db(transaction=True)

SCOPES = ["drug:valsartan|*", "drug:valsartan|3069020", "drug:valsartan|3061169", "ndc:0378-5814|*",
          "ndc:0378-5814|3069020", "drug:losartan|*", "lot:~3069020"]


def _decide(premises):
    return run_in_transaction(lambda: record_decision(question="is my valsartan safe", verdict="caution",
                                                      answer="Caution.", reasoner="rules/1", reads=[],
                                                      premises=premises))


def test_random_decisions_rest_on_exactly_their_scopes():
    rng = random.Random(20261205)
    shapes = [rng.sample(SCOPES, rng.randint(0, 4)) for _ in range(5)]
    expected = {}
    for _ in range(80):
        chosen = rng.choice(shapes) if rng.random() < 0.6 else rng.sample(SCOPES, rng.randint(0, 6))
        chosen = chosen + rng.sample(chosen, min(len(chosen), 1))  # a scope named twice is one premise
        decision = _decide(chosen)
        expected[decision.id] = sorted(set(chosen))
    for decision_id, scopes in expected.items():
        decision = Decision.objects.get(pk=decision_id)
        assert list(decision.premises.values_list("scope", flat=True)) == scopes, decision_id
    distinct = {tuple(s) for s in expected.values()}
    assert PremiseSet.objects.count() == len(distinct) < len(expected)
    # Each set is stored once: its members are exactly the distinct contents, no copy per decision.
    assert PremiseSetMember.objects.count() == sum(len(s) for s in distinct)
    for premise_set in PremiseSet.objects.all():
        assert premise_set.members.count() == premise_set.size


def test_the_address_is_the_content():
    one = premise_sets.premise_set_id(["drug:valsartan|*", "drug:valsartan|3069020"])
    assert one == premise_sets.premise_set_id(["drug:valsartan|3069020", "drug:valsartan|*", "drug:valsartan|*"])
    assert one != premise_sets.premise_set_id(["drug:valsartan|*"])
    assert premise_sets.premise_set_id([]) != one
    frozen = importlib.import_module("memory.migrations.0018_premise_sets")._content_id
    for scopes in ([], ["drug:valsartan|*"], SCOPES, list(reversed(SCOPES))):
        assert frozen(scopes) == premise_sets.premise_set_id(scopes)


def test_a_premise_set_is_history_and_never_deleted():
    decision = _decide(["drug:valsartan|*"])
    with pytest.raises(IntegrityError, match="memory_premiseset are history and are never deleted"):
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM memory_premiseset WHERE id = %s", [decision.premise_set_id])
    assert decision.premises.count() == 1


def test_the_migration_moves_premises_into_shared_sets_and_back():
    before, after = ("memory", "0017_fact_embedding_after_commit"), ("memory", "0018_premise_sets")
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    try:
        old = MigrationExecutor(connection).loader.project_state([before]).apps
        OldDecision, OldPremise = (old.get_model("memory", n) for n in ("Decision", "DecisionPremise"))
        premises_of = {}
        for n, size in enumerate([0, 1, 2, 0, 1, 2, 4]):  # three shapes shared by six decisions, one of its own
            decision = OldDecision.objects.create(question=f"q{n}", verdict="safe", answer="a", reasoner="rules/1",
                                                  decided_at="2026-12-05T12:00:00Z")
            premises_of[decision.id] = sorted(SCOPES[:size])
            OldPremise.objects.bulk_create([OldPremise(decision=decision, scope=s) for s in SCOPES[:size]])
        MigrationExecutor(connection).migrate([after])
        for decision_id, scopes in premises_of.items():
            decision = Decision.objects.only("premise_set").get(pk=decision_id)  # the columns 0018 has
            assert list(decision.premises.values_list("scope", flat=True)) == scopes
        assert PremiseSet.objects.count() == 4 and PremiseSetMember.objects.count() == 0 + 1 + 2 + 4
        # And back: every decision's premises written again from its set.
        executor = MigrationExecutor(connection)
        executor.migrate([before])
        old = executor.loader.project_state([before]).apps
        OldPremise = old.get_model("memory", "DecisionPremise")
        for decision_id, scopes in premises_of.items():
            assert sorted(OldPremise.objects.filter(decision_id=decision_id).values_list("scope", flat=True)) == scopes
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
