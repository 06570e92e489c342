"""Recall facts carry `name:` scopes: the first distinctive naming word of each product name they print
(drugs.scopes), so a recall finds the standing decisions about a product the vocabulary cannot name,
typed by its brand. Scopes are derived from a fact's subject, lot, NDC products and product names (not
part of its content), so they are recomputed in place, like an index (as 0012 did). Facts written before
ingestion kept product names read them from the text their identity came from and their statement
(drugs.recall_terms.product_names)."""

from django.db import migrations


def recompute(apps, schema_editor):
    from drugs import recall_terms
    from drugs.scopes import claim_ndc_products, fact_scopes

    Fact = apps.get_model("memory", "Fact")
    for fact in Fact.objects.filter(kind__in=["recall", "label"]).defer("embedding").order_by("pk").iterator(
            chunk_size=2000):
        names = recall_terms.product_names(fact) if fact.kind == "recall" else ()
        scopes = fact_scopes(fact.subject, fact.lot or None, claim_ndc_products(fact.attributes), names)
        if scopes != list(fact.scopes or []):
            Fact.objects.filter(pk=fact.pk).update(scopes=scopes)


class Migration(migrations.Migration):

    dependencies = [
        ("memory", "0014_drop_unread_indexes"),
    ]

    operations = [migrations.RunPython(recompute, migrations.RunPython.noop)]
