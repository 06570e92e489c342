"""Models keep to the layers too. A relation (ForeignKey, OneToOneField, ManyToManyField, however it
was declared: class or "app.Model" string) is a dependency just as an import is, so a model may point
only to models of its own app or of a layer below; the order is read from the layers contract in
.importlinter, the one place it is written (core.layers reads it). Each model's table is named for
the app that owns it."""

# ruff: noqa: DJ008 -- the synthetic models below exist only to be inspected, never shown

from django.apps import apps
from django.db import models
from django.test.utils import isolate_apps

from core.layers import layer_order

# Relations declared to settings.AUTH_USER_MODEL name "the configured user model", Django's own
# indirection for it, not an app: the user model (unsay_site.User) is the project's choice, read from
# settings, and every layer may record who acted.
SWAPPABLE_SETTINGS = {"AUTH_USER_MODEL"}


def may_point_to(layers: list[list[str]]):
    """A check (from_app, to_app) -> bool: the same app, or an app in a layer strictly below. Apps side
    by side in one layer (`recalls | patients`) are independent: neither points to the other."""
    rank = {app: i for i, layer in enumerate(layers) for app in layer}

    def allowed(from_app: str, to_app: str) -> bool:
        if from_app == to_app or to_app not in rank:
            return True  # Django's own apps and third-party apps sit below everything of ours
        return rank[to_app] < rank[from_app]

    return allowed, rank


def relation_fields(model):
    """The relations a model declares itself (not the reverse ones other models give it)."""
    for field in model._meta.get_fields():
        if field.auto_created or not field.is_relation or field.related_model is None:
            continue
        if field.many_to_one or field.one_to_one or field.many_to_many:
            yield field


def upward_relations(models_, layers) -> list[str]:
    """`app.Model.field -> app.Model` for each relation of one of our models to a model of a higher
    (or an independent) layer."""
    allowed, rank = may_point_to(layers)
    offenders = []
    for model in models_:
        app = model._meta.app_label
        if app not in rank:
            continue
        for field in relation_fields(model):
            if getattr(field, "swappable_setting", None) in SWAPPABLE_SETTINGS:
                continue
            target = field.related_model._meta
            if not allowed(app, target.app_label):
                offenders.append(f"{model._meta.label}.{field.name} -> {target.label}")
    return sorted(offenders)


def misnamed_tables(models_, layers) -> list[str]:
    """`app.Model: table` for each of our models whose table is not named app_label_..."""
    ours = {app for layer in layers for app in layer}
    return sorted(f"{m._meta.label}: {m._meta.db_table}" for m in models_
                  if m._meta.app_label in ours and not m._meta.db_table.startswith(m._meta.app_label + "_"))


# -- the project ------------------------------------------------------------------------------------

def test_no_model_points_to_a_higher_layer():
    """No exceptions: what must name a row of a higher layer holds its id (memory.Decision.patient_id)."""
    offenders = upward_relations(apps.get_models(), layer_order())
    assert offenders == [], "relations to a higher layer:\n" + "\n".join(offenders)


def test_every_table_is_named_for_its_app():
    misnamed = misnamed_tables(apps.get_models(), layer_order())
    assert misnamed == [], "tables not named for their app:\n" + "\n".join(misnamed)


def test_the_layers_are_read_from_the_contract():
    layers = layer_order()
    assert layers[0] == ["core"] and layers[-1] == ["unsay_site"]
    assert ["recalls", "patients"] in layers or ["patients", "recalls"] in layers
    assert all(app in {a for layer in layers for a in layer} for app in ("memory", "ask", "corrections"))


# -- the checks themselves, on synthetic models -----------------------------------------------------

LAYERS = [["core"], ["memory"], ["recalls", "patients"], ["ask"]]


@isolate_apps("memory", "recalls", "patients", "ask")
def test_a_relation_upwards_is_found_whether_declared_by_class_or_string():
    class Person(models.Model):
        class Meta:
            app_label = "patients"

    class Lot(models.Model):
        class Meta:
            app_label = "recalls"

    class Answer(models.Model):
        person = models.ForeignKey("patients.Person", on_delete=models.PROTECT)  # string, resolved lazily
        only_person = models.OneToOneField(Person, on_delete=models.PROTECT, related_name="+")
        people = models.ManyToManyField(Person, related_name="+")
        previous = models.ForeignKey("self", null=True, on_delete=models.PROTECT)  # own app: fine

        class Meta:
            app_label = "memory"

    class Exposure(models.Model):
        person = models.ForeignKey(Person, on_delete=models.PROTECT)  # same layer, independent app
        answer = models.ForeignKey(Answer, on_delete=models.PROTECT)  # down: fine

        class Meta:
            app_label = "recalls"

    class Key(models.Model):
        person = models.ForeignKey(Person, on_delete=models.PROTECT)  # down: fine

        class Meta:
            app_label = "ask"

    assert upward_relations([Person, Lot, Answer, Exposure, Key], LAYERS) == [
        "memory.Answer.only_person -> patients.Person",
        "memory.Answer.people -> patients.Person",
        "memory.Answer.person -> patients.Person",
        "recalls.Exposure.person -> patients.Person",
    ]


@isolate_apps("memory", "ask")
def test_a_table_named_for_another_app_is_found():
    class Client(models.Model):
        class Meta:
            app_label = "ask"
            db_table = "memory_client"

    class Fact(models.Model):
        class Meta:
            app_label = "memory"

    assert misnamed_tables([Client, Fact], LAYERS) == ["ask.Client: memory_client"]


def test_the_contract_is_parsed_lowest_first_with_sides(tmp_path):
    contract = tmp_path / ".importlinter"
    contract.write_text("[importlinter:contract:layers]\nname = x\ntype = layers\n"
                        "layers =\n    ask\n    recalls | patients\n    memory\n    core\n")
    assert layer_order(contract) == LAYERS
