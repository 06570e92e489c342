"""Scopes and premises in canonical lots, with the near-lot scope (drugs.scopes).

Scopes are derived from a fact's subject, lot and NDC products (not part of its content, which stays
as it was asserted), so they are recomputed in place, like an index. A standing decision's lot
premises get their near-lot scope, so a recall of a lot it holds a near miss of finds it."""

from django.db import migrations


def recompute(apps, schema_editor):
    from drugs.lots import near_lot_key
    from drugs.scopes import claim_ndc_products, fact_scopes

    Fact = apps.get_model("memory", "Fact")
    for fact in Fact.objects.filter(kind__in=["recall", "label"]).defer("embedding").order_by("pk").iterator(
            chunk_size=2000):
        scopes = fact_scopes(fact.subject, fact.lot or None, claim_ndc_products(fact.attributes))
        if scopes != list(fact.scopes or []):
            Fact.objects.filter(pk=fact.pk).update(scopes=scopes)
    DecisionPremise = apps.get_model("memory", "DecisionPremise")
    wanted = set()
    for decision_id, scope in DecisionPremise.objects.filter(scope__contains="|").values_list(
            "decision_id", "scope").iterator(chunk_size=5000):
        lot = scope.rsplit("|", 1)[1]
        if lot not in ("*", "?"):
            wanted.add((decision_id, f"lot:~{near_lot_key(lot)}"))
    DecisionPremise.objects.bulk_create([DecisionPremise(decision_id=d, scope=s) for d, s in sorted(wanted)],
                                        batch_size=5000, ignore_conflicts=True)


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0011_history_references_unchecked"),
    ]

    operations = [migrations.RunPython(recompute, migrations.RunPython.noop)]
