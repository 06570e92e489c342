"""Sites held by API clients (ClientSite). Existing keys keep working where their client already has
data: each client is granted the sites its patients were dispensed at and the sites its pharmacy keys
received EPCIS documents at (the receipt's audit row names the key by prefix; a prefix shared by keys of
two clients grants nothing). Stock received by a command or the demo belongs to no client and is granted
by an operator in the admin."""

import django.db.models.deletion
from django.db import migrations, models

API_ACTOR = "api:"  # api/epcis.py records a receipt's actor as api:<key prefix>


def sites_with_data(apps) -> set[tuple[int, str]]:
    """(client id, site) for every site a client already has data at, read through the given app registry."""
    ClientPatient = apps.get_model("ask", "ClientPatient")
    ApiKey = apps.get_model("ask", "ApiKey")
    DispensingRecord = apps.get_model("patients", "DispensingRecord")
    ShelfEvent = apps.get_model("shelf", "ShelfEvent")

    client_of = ClientPatient.objects.filter(patient_id=models.OuterRef("patient_id")).values("client_id")
    pairs = set(DispensingRecord.objects.exclude(site="").annotate(client_id=models.Subquery(client_of))
                .filter(client_id__isnull=False).values_list("client_id", "site").distinct())
    received = (ShelfEvent.objects.filter(action="received", actor_label__startswith=API_ACTOR).exclude(site="")
                .values_list("actor_label", "site").distinct())
    for actor, site in received:
        clients = set(ApiKey.objects.filter(prefix=actor[len(API_ACTOR):], kind="pharmacy")
                      .values_list("client_id", flat=True))
        if len(clients) == 1:
            pairs.add((clients.pop(), site))
    return {(client_id, site) for client_id, site in pairs if site.strip() and len(site) <= 200}


def grant_sites_with_data(apps, schema_editor):
    ClientSite = apps.get_model("ask", "ClientSite")
    ClientSite.objects.bulk_create([ClientSite(client_id=client_id, site=site)
                                    for client_id, site in sorted(sites_with_data(apps))], ignore_conflicts=True)


class Migration(migrations.Migration):

    dependencies = [
        ('ask', '0002_tables_named_for_ask'),
        ('patients', '0010_lot_field_read'),
        # Read only, to grant the sites a client's keys already received stock at.
        ('shelf', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='ClientSite',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('site', models.CharField(help_text='Exactly as EPCIS receipts name it (?site=...).', max_length=200)),
                ('created', models.DateTimeField(auto_now_add=True)),
                ('client', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='sites', to='ask.apiclient')),
            ],
            options={
                'verbose_name': 'site', 'verbose_name_plural': 'sites',
                'constraints': [models.UniqueConstraint(fields=('client', 'site'), name='ask_clientsite_once'), models.CheckConstraint(condition=models.Q(('site', ''), _negated=True), name='ask_clientsite_named')],
            },
        ),
        migrations.RunPython(grant_sites_with_data, migrations.RunPython.noop),
    ]
