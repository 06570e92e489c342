"""API clients, keys and usage counters move here from memory: state only, the tables keep their names (memory_apiclient, ...)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('memory', '0007_read_bearing_fact_decision'),
        ('patients', '0007_lot_unknown_is_the_one_field'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name='ApiClient',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=200, unique=True)),
                    ('created', models.DateTimeField(auto_now_add=True)),
                ],
                options={
                    'verbose_name': 'API client',
                    'db_table': 'memory_apiclient',
                },
            ),
            migrations.CreateModel(
                name='ClientPatient',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('client', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='patient_links', to='ask.apiclient')),
                    ('patient', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='api_client_link', to='patients.patient')),
                ],
                options={
                    'db_table': 'memory_clientpatient',
                },
            ),
            migrations.CreateModel(
                name='UsageCounter',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('scope', models.CharField(help_text='"daily" or "client:<id>" (hourly).', max_length=100)),
                    ('window_start', models.DateTimeField()),
                    ('n', models.PositiveIntegerField(default=0)),
                ],
                options={
                    'db_table': 'memory_usagecounter',
                    'constraints': [models.UniqueConstraint(fields=('scope', 'window_start'), name='usage_counter_window_unique')],
                },
            ),
            migrations.CreateModel(
                name='ApiKey',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('kind', models.CharField(choices=[('pharmacy', 'Pharmacy (names a patient of its client per request)'), ('patient', 'Patient-facing (bound to one patient)')], max_length=10)),
                    ('name', models.CharField(blank=True, max_length=200)),
                    ('pharmacist_scope', models.BooleanField(default=False, help_text='May read recall exposure for its client.')),
                    ('prefix', models.CharField(help_text='First characters of the secret, to recognise a key.', max_length=16)),
                    ('key_hash', models.CharField(max_length=64, unique=True)),
                    ('created', models.DateTimeField(auto_now_add=True)),
                    ('last_used_at', models.DateTimeField(blank=True, null=True)),
                    ('revoked_at', models.DateTimeField(blank=True, null=True)),
                    ('client', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='keys', to='ask.apiclient')),
                    ('patient', models.ForeignKey(blank=True, help_text='Required for patient-facing keys.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='api_keys', to='patients.patient')),
                ],
                options={
                    'verbose_name': 'API key',
                    'db_table': 'memory_apikey',
                    'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('kind', 'patient'), ('patient__isnull', False)), models.Q(('kind', 'pharmacy'), ('patient__isnull', True)), _connector='OR'), name='apikey_patient_iff_patient_kind'), models.CheckConstraint(condition=models.Q(('pharmacist_scope', False), ('kind', 'pharmacy'), _connector='OR'), name='apikey_pharmacist_scope_pharmacy_only')],
                },
            ),
        ], database_operations=[]),
    ]
