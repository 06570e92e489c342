"""A decision's reads become a read set stored once by its content (ADR 0016): existing reads move into
sets, each decision points at its set, and the per-decision read table goes.

The move runs in batches of decisions by id and is reversible (the reverse writes every decision's reads
back from its set). The content address is frozen here (`_content_id`, the form memory.read_sets.read_set_id
had when this migration was written; tests/memory/test_read_sets.py checks they agree), so the
migration means the same whenever it runs. Sets are history like facts and decisions: PostgreSQL refuses
their DELETE, CockroachDB keeps the foreign keys (memory/0011)."""

import hashlib
import json
from itertools import groupby

import django.db.models.deletion
from django.db import migrations, models

from core.migration_ops import EngineSQL, named_foreign_keys

BATCH = 2000
REFERENCES = [
    ("memory_decision", "read_set_id", "memory_readset"),
    ("memory_readsetmember", "read_set_id", "memory_readset"),
    ("memory_readsetmember", "fact_id", "memory_fact"),
]
KEPT_ON_COCKROACH, DROPPED_ON_COCKROACH = named_foreign_keys(REFERENCES)
FORWARD = {
    "postgresql": ["CREATE TRIGGER read_set_is_never_deleted BEFORE DELETE ON memory_readset "
                   "FOR EACH ROW EXECUTE FUNCTION unsay_history_is_never_deleted()"],
    "cockroachdb": KEPT_ON_COCKROACH,
}
REVERSE = {
    "postgresql": ["DROP TRIGGER IF EXISTS read_set_is_never_deleted ON memory_readset"],
    "cockroachdb": DROPPED_ON_COCKROACH,
}


def _content_id(members) -> str:
    canonical = [[m.fact_key, int(m.fact_version), int(m.rank), float(m.score), bool(m.load_bearing)]
                 for m in sorted(members, key=lambda m: (m.rank, m.fact_key, m.fact_version))]
    payload = json.dumps(canonical, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def _batches(Decision, queryset):
    after = 0
    while True:
        ids = list(queryset.filter(id__gt=after).order_by("id").values_list("id", flat=True)[:BATCH])
        if not ids:
            return
        yield ids
        after = ids[-1]


def reads_into_sets(apps, schema_editor):
    Decision = apps.get_model("memory", "Decision")
    DecisionRead = apps.get_model("memory", "DecisionRead")
    ReadSet = apps.get_model("memory", "ReadSet")
    ReadSetMember = apps.get_model("memory", "ReadSetMember")
    for ids in _batches(Decision, Decision.objects.filter(read_set__isnull=True)):
        reads = DecisionRead.objects.filter(decision_id__in=ids).order_by("decision_id", "rank", "id")
        by_decision = {decision_id: list(rows) for decision_id, rows in groupby(reads, key=lambda r: r.decision_id)}
        sets, decisions_of = {}, {}
        for decision_id in ids:
            members = by_decision.get(decision_id, [])
            set_id = _content_id(members)
            sets[set_id] = members
            decisions_of.setdefault(set_id, []).append(decision_id)
        known = set(ReadSet.objects.filter(id__in=list(sets)).values_list("id", flat=True))
        new = {set_id: members for set_id, members in sets.items() if set_id not in known}
        ReadSet.objects.bulk_create([ReadSet(id=set_id, size=len(m)) for set_id, m in new.items()],
                                    ignore_conflicts=True)
        ReadSetMember.objects.bulk_create(
            [ReadSetMember(read_set_id=set_id, fact_id=r.fact_id, fact_key=r.fact_key, fact_version=r.fact_version,
                           rank=r.rank, score=r.score, load_bearing=r.load_bearing)
             for set_id, members in new.items() for r in members], ignore_conflicts=True)
        for set_id, decision_ids in decisions_of.items():
            Decision.objects.filter(id__in=decision_ids).update(read_set_id=set_id)


def sets_into_reads(apps, schema_editor):
    Decision = apps.get_model("memory", "Decision")
    DecisionRead = apps.get_model("memory", "DecisionRead")
    ReadSetMember = apps.get_model("memory", "ReadSetMember")
    for ids in _batches(Decision, Decision.objects.filter(read_set__isnull=False)):
        pairs = list(Decision.objects.filter(id__in=ids).values_list("id", "read_set_id"))
        members = {}
        for m in ReadSetMember.objects.filter(read_set_id__in={s for _d, s in pairs}).order_by("rank"):
            members.setdefault(m.read_set_id, []).append(m)
        DecisionRead.objects.bulk_create(
            [DecisionRead(decision_id=decision_id, fact_id=m.fact_id, fact_key=m.fact_key,
                          fact_version=m.fact_version, rank=m.rank, score=m.score, load_bearing=m.load_bearing)
             for decision_id, set_id in pairs for m in members.get(set_id, [])], batch_size=BATCH)


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0015_name_scopes'),
    ]

    operations = [
        migrations.CreateModel(
            name='ReadSet',
            fields=[
                ('id', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('size', models.PositiveIntegerField(help_text='Number of members (fact versions read).')),
            ],
        ),
        migrations.CreateModel(
            name='ReadSetMember',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('read_set', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='members', to='memory.readset')),
                ('fact', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='read_set_members', to='memory.fact')),
                ('fact_key', models.CharField(max_length=255)),
                ('fact_version', models.PositiveIntegerField()),
                ('rank', models.PositiveIntegerField()),
                ('score', models.FloatField()),
                ('load_bearing', models.BooleanField(default=False)),
            ],
            options={
                'ordering': ['rank'],
                'constraints': [models.UniqueConstraint(fields=('read_set', 'fact'), name='read_set_member_once')],
            },
        ),
        migrations.AddField(
            model_name='decision',
            name='read_set',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='decisions', to='memory.readset'),
        ),
        migrations.RunPython(reads_into_sets, sets_into_reads, elidable=False),
        migrations.AddIndex(
            model_name='decision',
            index=models.Index(fields=['read_set', 'id'], name='decision_read_set'),
        ),
        migrations.AddIndex(
            model_name='readsetmember',
            index=models.Index(condition=models.Q(('load_bearing', True)), fields=['fact', 'read_set'], name='read_set_bearing_fact'),
        ),
        migrations.DeleteModel(
            name='DecisionRead',
        ),
        EngineSQL(FORWARD, REVERSE),
    ]
