"""Re-ingesting real records after the lot-scope parser change versions exactly the facts
whose scope changed: new facts for newly read lots, retractions for lots no longer read, a new version
for a drug-level fact that gained a window or changed its "all lots" wording, or a lot that became
(un)certain, and nothing for the rest.

The first ingest runs with the old parser's result (a frozen copy in tests/legacy_lots.py, fed through
the same ingestion code), the second with recalls.lots.parse_scope, over the same real records.
"""

import copy
import json
import random
import zipfile
from functools import lru_cache

import pytest

from memory.models import Fact
from recalls import ingest, record_fields
from recalls.lots.parse import parse_scope
from recalls.lots.scope import LotScope, ScopedLot, scope_terms
from recalls.services import ingest_document
from tests import legacy_lots
from tests.paths import OPENFDA

SNAPSHOT = OPENFDA / "drug-enforcement-2023-08-05-part.json.zip"

pytestmark = pytest.mark.django_db(transaction=True)


def _legacy_scope(code_info, more_code_info=""):
    text = " ".join(part for part in (code_info, more_code_info) if part)
    lots, says_all = legacy_lots.extract_lots(text), legacy_lots.mentions_all_lots(text)
    return LotScope(kind="lots" if lots and not says_all else "all_lots", lots=[ScopedLot(lot) for lot in lots],
                    says_all_lots=says_all)


@lru_cache
def _records():
    with zipfile.ZipFile(SNAPSHOT) as archive:
        records = json.loads(archive.read(archive.namelist()[0]))["results"]
    counts = {}
    for record in records:
        counts[record["recall_number"]] = counts.get(record["recall_number"], 0) + 1
    return [r for r in records if counts[r["recall_number"]] == 1 and len(r.get("code_info") or "") < 5000]


def _keys_and_scope(record, parse):
    scope = parse(record.get("code_info") or "", record.get("more_code_info") or "")
    if scope.kind == "lots" and scope.lots:
        return {f"lot:{lot}" for lot in scope.lot_numbers}, scope
    return {"drug"}, scope


def _terms(scope, key):
    attribute = scope.as_attribute()
    return scope_terms(attribute if key == "drug" else attribute.for_lot(key[len("lot:"):]))


def _expected(record):
    old_keys, old_scope = _keys_and_scope(record, _legacy_scope)
    new_keys, new_scope = _keys_and_scope(record, parse_scope)
    versions = sum(1 for key in old_keys & new_keys
                   if _terms(old_scope, key) != _terms(new_scope, key)
                   or (key == "drug" and old_scope.says_all_lots != new_scope.says_all_lots))
    return versions, len(new_keys - old_keys), len(old_keys - new_keys)


def _slice():
    """Every record of the snapshot whose scope the new parser reads differently (up to 45), and 45 whose
    scope is the same: real records, picked with a fixed seed."""
    changed, same = [], []
    for record in _records():
        (changed if any(_expected(record)) else same).append(record)
    rng = random.Random(17)
    return rng.sample(changed, min(45, len(changed))), rng.sample(same, 45)


def _doc(records):
    return {"meta": {"results": {"total": len(records)}}, "results": [copy.deepcopy(r) for r in records]}


def test_reingesting_after_the_parser_change_versions_exactly_the_changed_scopes(hashing_embeddings, monkeypatch):
    changed, same = _slice()
    records = changed + same
    expected = [sum(column) for column in zip(*(_expected(r) for r in records), strict=True)]
    assert expected[0] > 0 and expected[1] > 0 and expected[2] > 0  # the slice has all three kinds of change

    with monkeypatch.context() as patch:  # the store as the old parser left it
        patch.setattr(ingest, "parse_scope", _legacy_scope)
        patch.setattr(record_fields, "LOT_SCOPE_VERSION", "1")
        first = ingest_document(_doc(records), workers=2)
    assert first.quarantined == 0
    before = Fact.objects.count()

    second = ingest_document(_doc(records), workers=2)
    assert [second.new_versions, second.new_facts, second.retracted] == expected
    assert second.unchanged == len(same) + sum(1 for r in changed if not any(_expected(r)))
    assert Fact.objects.count() == before + second.new_versions + second.new_facts
    # Lot facts now carry only their own lot's scope; drug-level facts of window scopes carry the window.
    for record in changed:
        scope = parse_scope(record.get("code_info") or "", record.get("more_code_info") or "")
        believed = Fact.objects.believed().filter(attributes__recall_number=record["recall_number"])
        if scope.kind == "lots":
            assert {f.lot for f in believed} == set(scope.lot_numbers)
        else:
            (fact,) = believed
            assert fact.lot is None
            if scope.kind == "all_lots_window" and fact.attributes.get("lot_scope"):
                assert fact.attributes["lot_scope"]["kind"] == "all_lots_window"

    third = ingest_document(_doc(records), workers=2)  # and once read, nothing changes again
    assert (third.new_versions, third.new_facts, third.retracted) == (0, 0, 0)
