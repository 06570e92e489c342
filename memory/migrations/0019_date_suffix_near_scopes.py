"""A recall lot with a repackager's date after the maker's lot ("B2110254-021423") answers to the maker's lot
alone as a near miss (drugs.lots._DATE_SUFFIX): its facts get that near-lot scope, so a dispensing recorded with
the maker's lot finds them. Scopes are derived, not content, so they are extended in place, like an index."""

from django.db import migrations


def add_near_scopes(apps, schema_editor):
    from drugs.scopes import NEAR_LOT
    from drugs.lots import near_lot_keys

    Fact = apps.get_model("memory", "Fact")
    facts = Fact.objects.filter(kind="recall", lot__regex=r"-([0-9]{6}|[0-9]{8})$").defer("embedding").order_by("pk")
    for fact in facts.iterator(chunk_size=2000):
        scopes = list(fact.scopes or [])
        added = [f"{NEAR_LOT}{near}" for near in sorted(near_lot_keys(fact.lot)) if f"{NEAR_LOT}{near}" not in scopes]
        if added:
            Fact.objects.filter(pk=fact.pk).update(scopes=scopes + added)


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0018_premise_sets"),
    ]

    operations = [migrations.RunPython(add_near_scopes, migrations.RunPython.noop)]
