"""Real openFDA enforcement records and hypothesis strategies that break them the ways real feeds
and attackers do. Every base record is real (tests/fixtures/openfda/); only the mutation is ours."""

import copy
import json
import zipfile
from collections.abc import Sequence
from functools import lru_cache

from hypothesis import strategies as st

from tests.paths import OPENFDA as FIXTURES

OLD = FIXTURES / "drug-enforcement-2021-04-28.json.zip"
NEW = FIXTURES / "drug-enforcement-2023-08-05-part.json.zip"

TEXT_FIELDS = ("reason_for_recall", "product_description", "code_info", "recalling_firm", "distribution_pattern",
               "recall_number", "status", "classification", "more_code_info", "event_id", "city", "state")
DATE_FIELDS = ("recall_initiation_date", "termination_date", "report_date")


@lru_cache
def records(path=OLD) -> tuple:
    with zipfile.ZipFile(path) as zf:
        return tuple(json.loads(zf.read(zf.namelist()[0]))["results"])


class _UniqueGoodRecords(Sequence):
    """Real records of one file that ingest cleanly on their own and whose recall number appears once, in
    the file's order. Each is parsed when first asked for: tests that take the first few do not parse the
    other thousands (about 14 s for the 2021 file)."""

    def __init__(self, path):
        self._all = records(path)
        self._counts = {}
        for r in self._all:
            self._counts[r["recall_number"]] = self._counts.get(r["recall_number"], 0) + 1
        self._next = 0  # the next of self._all to look at
        self._good = []

    def _reach(self, count) -> bool:
        """Parse on until `count` good records are known (all of them for None); False when there are fewer."""
        from recalls.ingest import parse_enforcement
        from recalls.record_fields import Malformed

        while (count is None or len(self._good) < count) and self._next < len(self._all):
            r = self._all[self._next]
            self._next += 1
            if self._counts[r["recall_number"]] != 1:
                continue
            try:
                parse_enforcement(copy.deepcopy(r))
            except Malformed:
                continue
            self._good.append(r)
        return count is not None and len(self._good) >= count

    def __getitem__(self, index):
        if isinstance(index, slice):
            if index.stop is None or index.stop < 0 or (index.start or 0) < 0:
                self._reach(None)
            else:
                self._reach(index.stop)
            return tuple(self._good[index])
        if index < 0 or not self._reach(index + 1):
            self._reach(None)
        return self._good[index]

    def __iter__(self):
        index = 0
        while index < len(self._good) or self._reach(index + 1):
            yield self._good[index]
            index += 1

    def __len__(self):
        self._reach(None)
        return len(self._good)


@lru_cache
def unique_good_records(path=OLD) -> _UniqueGoodRecords:
    """Real records that ingest cleanly on their own and whose recall number appears once (parsed lazily)."""
    return _UniqueGoodRecords(path)


# What breaks a record. Each returns (mutated record, True when it must be quarantined).
def _poison(value: str, poison: str, where: int) -> str:
    where = min(where, len(value))
    return value[:where] + poison + value[where:]


POISONS = st.sampled_from(["\x00", "\ud800", "\udfff", "a\x00b", "\udc80\x00"])
HARMLESS = st.sampled_from(["\u202e", "é", "💊", "\t", " trailing "])


@st.composite
def mutation(draw, base: dict):
    record = copy.deepcopy(base)
    kind = draw(st.sampled_from(["poison_text", "poison_openfda", "integer_ndc", "nested_ndc", "wrong_type",
                                 "bad_date", "lenient_date", "bad_recall_number", "too_many_lots", "deep",
                                 "not_object", "poison_key", "harmless"]))
    if kind == "poison_text":
        name = draw(st.sampled_from(TEXT_FIELDS))
        record[name] = _poison(str(record.get(name) or "x"), draw(POISONS), draw(st.integers(0, 60)))
        return record, True
    if kind == "poison_openfda":
        openfda = record.setdefault("openfda", {})
        name = draw(st.sampled_from(["generic_name", "brand_name", "package_ndc", "manufacturer_name"]))
        openfda[name] = [_poison("value", draw(POISONS), draw(st.integers(0, 5)))]
        return record, True
    if kind == "integer_ndc":
        record.setdefault("openfda", {})["package_ndc"] = [draw(st.integers(-10**12, 10**12))]
        return record, False  # an unusable NDC is ignored; the recall itself is good
    if kind == "nested_ndc":
        record.setdefault("openfda", {})["package_ndc"] = draw(st.sampled_from([[["0378-1234-01"]], [None], {"a": 1},
                                                                               [1.5, True]]))
        return record, False
    if kind == "wrong_type":
        name = draw(st.sampled_from(["status", "classification", "product_description", "recall_number",
                                     "recall_initiation_date", "code_info"]))
        record[name] = draw(st.sampled_from([[record.get(name)], {"v": 1}, 12.5, True]))
        return record, True
    if kind == "bad_date":
        name = draw(st.sampled_from(DATE_FIELDS))
        record[name] = draw(st.sampled_from(["20191", "2019-01-01", "18000101", "29990101", "20191332", "٢٠١٩٠١٠١",
                                             "201911", "２０１９０１０１"]))
        return record, True
    if kind == "lenient_date":
        record["recall_initiation_date"] = "201911"
        return record, True
    if kind == "bad_recall_number":
        record["recall_number"] = draw(st.sampled_from(["D-0001/2019", "../admin", "D 0001 2019", "D-0001-2019?x=1",
                                                        "d-0001-2019", "D-0001-2019#", "%2F"]))
        return record, True
    if kind == "too_many_lots":
        record["code_info"] = "Lots: " + ", ".join(f"A{n:05d}" for n in range(draw(st.integers(1001, 1300))))
        record["more_code_info"] = ""
        return record, True
    if kind == "deep":
        deep = "x"
        for _ in range(draw(st.integers(25, 60))):
            deep = [deep]
        record["openfda"] = {"generic_name": deep}
        return record, True
    if kind == "not_object":
        return draw(st.sampled_from(["a string", 12, None, ["list"], True])), True
    if kind == "poison_key":
        record["bad\x00key"] = "v"
        return record, True
    name = draw(st.sampled_from(["reason_for_recall", "distribution_pattern", "recalling_firm"]))
    record[name] = str(record.get(name) or "") + draw(HARMLESS)
    return record, False
