"""A decision's premises become a premise set stored once by its content (ADR 0018): existing premises
move into sets, each decision points at its set, and the per-decision premise table goes.

The move runs in batches of decisions by id and is reversible (the reverse writes every decision's
premises back from its set). The content address is frozen here (`_content_id`, the form
memory.premise_sets.premise_set_id had when this migration was written; tests/memory/test_premise_sets.py
checks they agree). Sets are history like read sets: PostgreSQL refuses their DELETE, CockroachDB keeps
the foreign keys (memory/0011)."""

import hashlib
import json
from itertools import groupby

import django.db.models.deletion
from django.db import migrations, models

from core.migration_ops import EngineSQL, named_foreign_keys

BATCH = 2000
REFERENCES = [
    ("memory_decision", "premise_set_id", "memory_premiseset"),
    ("memory_premisesetmember", "premise_set_id", "memory_premiseset"),
]
KEPT_ON_COCKROACH, DROPPED_ON_COCKROACH = named_foreign_keys(REFERENCES)
FORWARD = {
    "postgresql": ["CREATE TRIGGER premise_set_is_never_deleted BEFORE DELETE ON memory_premiseset "
                   "FOR EACH ROW EXECUTE FUNCTION unsay_history_is_never_deleted()"],
    "cockroachdb": KEPT_ON_COCKROACH,
}
REVERSE = {
    "postgresql": ["DROP TRIGGER IF EXISTS premise_set_is_never_deleted ON memory_premiseset"],
    "cockroachdb": DROPPED_ON_COCKROACH,
}


def _content_id(scopes) -> str:
    payload = json.dumps(sorted(set(scopes)), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def _batches(queryset):
    after = 0
    while True:
        ids = list(queryset.filter(id__gt=after).order_by("id").values_list("id", flat=True)[:BATCH])
        if not ids:
            return
        yield ids
        after = ids[-1]


def premises_into_sets(apps, schema_editor):
    Decision = apps.get_model("memory", "Decision")
    DecisionPremise = apps.get_model("memory", "DecisionPremise")
    PremiseSet = apps.get_model("memory", "PremiseSet")
    PremiseSetMember = apps.get_model("memory", "PremiseSetMember")
    for ids in _batches(Decision.objects.filter(premise_set__isnull=True)):
        rows = DecisionPremise.objects.filter(decision_id__in=ids).order_by("decision_id", "scope").values_list(
            "decision_id", "scope")
        by_decision = {decision_id: [scope for _d, scope in group]
                       for decision_id, group in groupby(rows, key=lambda r: r[0])}
        sets, decisions_of = {}, {}
        for decision_id in ids:
            scopes = sorted(set(by_decision.get(decision_id, [])))
            set_id = _content_id(scopes)
            sets[set_id] = scopes
            decisions_of.setdefault(set_id, []).append(decision_id)
        known = set(PremiseSet.objects.filter(id__in=list(sets)).values_list("id", flat=True))
        new = {set_id: scopes for set_id, scopes in sets.items() if set_id not in known}
        PremiseSet.objects.bulk_create([PremiseSet(id=set_id, size=len(s)) for set_id, s in new.items()],
                                       ignore_conflicts=True)
        PremiseSetMember.objects.bulk_create(
            [PremiseSetMember(premise_set_id=set_id, scope=scope) for set_id, scopes in new.items() for scope in scopes],
            ignore_conflicts=True)
        for set_id, decision_ids in decisions_of.items():
            Decision.objects.filter(id__in=decision_ids).update(premise_set_id=set_id)


def sets_into_premises(apps, schema_editor):
    Decision = apps.get_model("memory", "Decision")
    DecisionPremise = apps.get_model("memory", "DecisionPremise")
    PremiseSetMember = apps.get_model("memory", "PremiseSetMember")
    for ids in _batches(Decision.objects.filter(premise_set__isnull=False)):
        pairs = list(Decision.objects.filter(id__in=ids).values_list("id", "premise_set_id"))
        scopes = {}
        for set_id, scope in PremiseSetMember.objects.filter(
                premise_set_id__in={s for _d, s in pairs}).order_by("scope").values_list("premise_set_id", "scope"):
            scopes.setdefault(set_id, []).append(scope)
        DecisionPremise.objects.bulk_create(
            [DecisionPremise(decision_id=decision_id, scope=scope)
             for decision_id, set_id in pairs for scope in scopes.get(set_id, [])], batch_size=BATCH)


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0017_fact_embedding_after_commit'),
    ]

    operations = [
        migrations.CreateModel(
            name='PremiseSet',
            fields=[
                ('id', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('size', models.PositiveIntegerField(help_text='Number of scopes.')),
            ],
        ),
        migrations.CreateModel(
            name='PremiseSetMember',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('premise_set', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='members', to='memory.premiseset')),
                ('scope', models.CharField(max_length=255)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('premise_set', 'scope'), name='premise_set_member_once')],
            },
        ),
        migrations.AddField(
            model_name='decision',
            name='premise_set',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='decisions', to='memory.premiseset'),
        ),
        migrations.RunPython(premises_into_sets, sets_into_premises, elidable=False),
        migrations.AddIndex(
            model_name='decision',
            index=models.Index(condition=models.Q(('status', 'standing')), fields=['premise_set'], name='decision_premise_set'),
        ),
        migrations.AddIndex(
            model_name='premisesetmember',
            index=models.Index(fields=['scope', 'premise_set'], name='premise_set_scope'),
        ),
        migrations.DeleteModel(
            name='DecisionPremise',
        ),
        EngineSQL(FORWARD, REVERSE),
    ]
