"""Quarantined records are kept once per record and source: existing rows get their source (their run's
snapshot location, else its source) and digest (SHA-256 of the kept record, keys sorted, as
recalls.quarantine computes it); copies of one record from one source, written by ingesting a file again,
are folded into the latest (which keeps the first sighting as `created` and the last as `last_seen`)."""

import hashlib
import json

from django.db import migrations, models
from django.db.models import Max, Min


def fold_copies(apps, schema_editor):
    QuarantinedRecord = apps.get_model("recalls", "QuarantinedRecord")
    rows = QuarantinedRecord.objects.select_related("run").only(
        "id", "raw", "created", "run__snapshot_location", "run__source_ref")
    for row in rows.iterator(chunk_size=500):
        source = (row.run.snapshot_location or row.run.source_ref)[:500]
        digest = hashlib.sha256(json.dumps(row.raw, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
        QuarantinedRecord.objects.filter(pk=row.pk).update(source=source, record_digest=digest, last_seen=row.created)
    groups = (QuarantinedRecord.objects.values("source", "record_digest")
              .annotate(latest=Max("id"), first=Min("created"), copies=models.Count("id")).filter(copies__gt=1))
    for group in groups:
        QuarantinedRecord.objects.filter(pk=group["latest"]).update(created=group["first"])
        QuarantinedRecord.objects.filter(source=group["source"], record_digest=group["record_digest"]).exclude(
            pk=group["latest"]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('recalls', '0007_recall_texts'),
    ]

    operations = [
        migrations.AddField(
            model_name='quarantinedrecord',
            name='last_seen',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='quarantinedrecord',
            name='record_digest',
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name='quarantinedrecord',
            name='source',
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.RunPython(fold_copies, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='quarantinedrecord',
            constraint=models.UniqueConstraint(fields=('source', 'record_digest'), name='quarantine_once_per_record_and_source'),
        ),
    ]
