"""The staff warning on saving a dispensing under an active recall always names the product, also for a
recall whose facts have no subject and refer to their long texts stored once per record version."""

from types import SimpleNamespace

from memory.models import Fact
from patients import services


def test_an_all_lots_recall_without_subject_is_named_by_its_identity_text(monkeypatch):
    fact = Fact(kind=Fact.Kind.RECALL, subject="", lot="", statement="Class II recall D-0987-2019 (Ongoing) of …",
                attributes={"recall_number": "D-0987-2019", "classification": "Class II", "status": "Ongoing",
                            "texts": "0" * 64, "identity_text": "White Vein Kratom 50 gram powder"})
    record = SimpleNamespace(drug="", drug_text="White Vein Kratom", lot_label="119", as_dispensed=lambda: None,
                             patient=SimpleNamespace(display_name="Synthetic SYN-1"))
    monkeypatch.setattr(services, "active_recalls_for_dispensing", lambda r: [fact])
    monkeypatch.setattr(services, "match", lambda f, r: SimpleNamespace(label="probable"))

    warning = services.recall_warning([record])

    assert "covers all lots of White Vein Kratom 50 gram powder" in warning, warning
    assert "D-0987-2019" in warning and "Class II" in warning
