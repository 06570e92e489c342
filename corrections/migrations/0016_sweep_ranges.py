"""The key ranges sweeps claim to share one stale set across workers (corrections.sweep_claims)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corrections", "0015_sweeprun_status_succeeded"),
    ]

    operations = [
        migrations.CreateModel(
            name="SweepRange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("first_id", models.BigIntegerField()),
                ("last_id", models.BigIntegerField()),
                ("decision_ids", models.JSONField(default=list)),
                ("lease_until", models.DateTimeField(blank=True, null=True)),
                ("claims", models.PositiveIntegerField(default=0)),
                ("done_at", models.DateTimeField(blank=True, null=True)),
                (
                    "claimed_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="claimed_ranges",
                        to="corrections.sweeprun",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="ranges",
                        to="corrections.sweeprun",
                    ),
                ),
            ],
            options={
                "ordering": ["run", "first_id"],
                "indexes": [
                    models.Index(
                        condition=models.Q(("done_at__isnull", True)),
                        fields=["run", "first_id"],
                        name="sweeprange_open",
                    )
                ],
            },
        ),
    ]
