"""A decision holds its patient as a plain patient_id: patients sits above memory in the layers
(docs/architecture.md), so memory keeps no foreign key up to it. The column, its values and the
decision_patient_subject index stay as they are; only the foreign-key constraint goes. A patient who
has decisions is still never deleted: patients refuses it (patients.signals)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0012_canonical_lot_scopes'),
        ('patients', '0009_patient_preferred_language'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The schema editor drops the constraint by what it finds on either engine, no SQL of ours.
            database_operations=[
                migrations.AlterField(
                    model_name='decision',
                    name='patient',
                    field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True,
                                            on_delete=django.db.models.deletion.PROTECT,
                                            related_name='decisions', to='patients.patient'),
                ),
            ],
            # The same column, now a plain integer field named for it.
            state_operations=[
                migrations.RemoveIndex(model_name='decision', name='decision_patient_subject'),
                migrations.RemoveField(model_name='decision', name='patient'),
                migrations.AddField(model_name='decision', name='patient_id',
                                    field=models.BigIntegerField(blank=True, null=True)),
                migrations.AddIndex(
                    model_name='decision',
                    index=models.Index(fields=['patient_id', 'subject', 'decided_at'],
                                       name='decision_patient_subject'),
                ),
            ],
        ),
    ]
