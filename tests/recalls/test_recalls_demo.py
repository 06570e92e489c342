"""The demo slice is real, unmodified openFDA records, reproducible from the committed script."""

import json
import zipfile

import pytest
from django.core.management import call_command

from demo.slice import DEMO_SLICE
from tests.paths import OPENFDA as FIXTURES

SLICE = DEMO_SLICE


def _canonical(record):
    return json.dumps(record, sort_keys=True)


def test_demo_slice_records_are_real_and_unmodified():
    with zipfile.ZipFile(FIXTURES / "drug-enforcement-2021-04-28.json.zip") as zf:
        bulk = json.loads(zf.read(zf.namelist()[0]))["results"]
    recent = json.loads((FIXTURES / "drug-enforcement-recent-sample.json").read_text())["results"]
    sources = {_canonical(r) for r in bulk} | {_canonical(r) for r in recent}
    document = json.loads(SLICE.read_text())
    records = document["results"]
    assert all(_canonical(r) in sources for r in records)
    assert document["meta"]["results"]["total"] == len(records)
    sartan = [r for r in records if any(name in (r["product_description"] + r["reason_for_recall"]).lower()
                                        for name in ("valsartan", "losartan", "irbesartan"))]
    assert len(sartan) >= 250
    assert sum(1 for r in records if _canonical(r) in {_canonical(x) for x in recent}) == 149
    assert len(records) == len(sartan) + 149 + 200
    assert any(r["classification"] == "Class II" and r["status"] == "Ongoing" and "valsartan" in
               r["product_description"].lower() for r in records)


def test_make_demo_slice_reproduces_the_committed_file(tmp_path):
    output = tmp_path / "slice.json"
    snapshots = FIXTURES
    call_command("make_demo_slice", "--output", str(output), "--snapshots", str(snapshots))
    assert json.loads(output.read_text()) == json.loads(SLICE.read_text())


def test_make_demo_slice_names_the_missing_snapshots(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="drug-enforcement-2021-04-28.json.zip"):
        call_command("make_demo_slice", "--output", str(tmp_path / "slice.json"), "--snapshots", str(tmp_path))
    assert not (tmp_path / "slice.json").exists()
