"""Every audited event already written joins the one keyed audit chain (core.audit_chain), in the order
written (time, then id; a tie between tables by table name): corrections audit events (their old unkeyed
links are dropped by corrections 0020), worklist events, shelf events and dispensing changes. Reads the
audit key from the settings, the one input a migration takes from the environment: the key is what makes
the links unforgeable, so the chain cannot be built without it (a database with no events needs none).
The fields each table is chained with are frozen here as they were when it was written."""

import heapq

from django.conf import settings
from django.db import migrations

from core.audit_chain import CHAIN_START, link_for

BATCH = 2000
LINK_FIELDS = ("seq", "event_table", "event_id", "key_id", "redactable_digest", "link_hash")

CHAINED = {
    ("corrections", "AuditEvent"): (
        ("at", "actor_id", "actor_label", "action", "correction_id", "decision_id", "sweep_run_id"),
        ("before", "after", "note")),
    ("worklist", "WorkEvent"): (
        ("at", "actor_id", "actor_label", "action", "recall_number", "patient_id"), ("details",)),
    ("shelf", "ShelfEvent"): (("at", "actor_id", "actor_label", "action", "site", "recall_number"), ("details",)),
    ("patients", "DispensingChange"): (("at", "actor_label", "action", "patient_id", "dispensing_id"),
                                       ("before", "after")),
}


def _in_order(model):
    table = model._meta.db_table
    for event in model.objects.order_by("at", "id").iterator(chunk_size=BATCH):
        yield (event.at, event.pk, table), event


def _flush(apps, links, events):
    link_model = apps.get_model("core", "AuditLink")  # links are built as core.models.AuditLink: copied over
    link_model.objects.bulk_create([link_model(**{name: getattr(link, name) for name in LINK_FIELDS}) for link in links])
    by_model = {}
    for event in events:
        by_model.setdefault(type(event), []).append(event)
    for model, rows in by_model.items():
        model.objects.bulk_update(rows, ["seq"])


def chain_every_event(apps, schema_editor):
    models = {apps.get_model(app, name): fields for (app, name), fields in CHAINED.items()}
    if not any(model.objects.exists() for model in models):
        return
    key_id = settings.UNSAY_AUDIT_KEY_ID
    key = settings.UNSAY_AUDIT_KEYS.get(key_id)
    if key is None:
        raise RuntimeError("Set UNSAY_AUDIT_KEY before migrating: the audit events on file are chained with it.")
    for model in models:
        model.objects.exclude(seq=None).update(seq=None)  # the old, unkeyed positions of corrections events
    previous, seq, links, events = CHAIN_START, 0, [], []
    for _order, event in heapq.merge(*(_in_order(model) for model in models), key=lambda pair: pair[0]):
        structure, redactable = models[type(event)]
        seq += 1
        event.seq = seq
        link = link_for(event, previous=previous, seq=seq, key_id=key_id, key=key, structure_names=structure,
                        redactable_names=redactable)
        previous = link.link_hash
        links.append(link)
        events.append(event)
        if len(links) >= BATCH:
            _flush(apps, links, events)
            links, events = [], []
    _flush(apps, links, events)
    apps.get_model("core", "AuditChainHead").objects.update_or_create(pk=1, defaults={"seq": seq,
                                                                                      "link_hash": previous})


def unchain(apps, schema_editor):
    for app, name in CHAINED:
        apps.get_model(app, name).objects.exclude(seq=None).update(seq=None)
    apps.get_model("core", "AuditLink").objects.all().delete()
    apps.get_model("core", "AuditChainHead").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ("core", "0001_initial"),
        ("corrections", "0020_audit_chain_in_core"),
        ("patients", "0011_dispensingchange_in_audit_chain"),
        ("shelf", "0004_shelfevent_in_audit_chain"),
        ("worklist", "0003_workevent_in_audit_chain"),
    ]

    operations = [migrations.RunPython(chain_every_event, unchain)]
