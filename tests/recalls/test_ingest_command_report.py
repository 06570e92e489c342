"""What `manage.py ingest_recalls` prints, line for line: the run, its refusals, what the sweep its writes
triggered did (or why none ran), and the embedding backlog. The sweep line is read by the command itself
from corrections (no signal answers for it); these tests pin the text the command printed when a signal
receiver supplied that line, so operators' scripts reading it see no change.

The recalls are REAL openFDA records (D-0315-2019 and D-0324-2019, Mylan valsartan, from the 2021 bulk
file); the refused record is a copy of one with an impossible date; the patient is SYNTHETIC."""

import copy
import io
import json
import re

import pytest
from django.core.management import call_command

from tests.factories import LOT, OTHER_RECALL, RECALL, VALSARTAN, make_patient, openfda_record

pytestmark = pytest.mark.django_db(transaction=True)  # ingest commits each record on its own

BAD_DATE = "recall_initiation_date '2021-13-45' is not a YYYYMMDD date"


def _file(tmp_path):
    broken = copy.deepcopy(openfda_record(RECALL)) | {"recall_number": "X-1", "recall_initiation_date": "2021-13-45"}
    records = [openfda_record(RECALL), openfda_record(OTHER_RECALL), broken]
    path = tmp_path / "recalls.json"
    path.write_text(json.dumps({"meta": {"results": {"total": len(records)}}, "results": records}))
    return path


def _printed(path, monkeypatch) -> list[str]:
    """The command's output with what changes from run to run (ids, times, rates) replaced by markers."""
    monkeypatch.setattr("memory.tasks.embed_facts.delay", lambda: None)  # a worker embeds elsewhere
    out = io.StringIO()
    call_command("ingest_recalls", "--file", str(path), "--no-progress", stdout=out)
    text = re.sub(r"\b([Rr]un) \d+\b", r"\1 N", out.getvalue().replace(str(path), "<file>"))
    text = re.sub(r"\d+\.\d+s( \d+ records/s)?$", "<time>", text, flags=re.MULTILINE)
    return text.splitlines()


def _run_line(new_facts: int) -> str:
    return (f"Run N succeeded: 3 records, {new_facts} new facts, 0 new versions, 0 retracted, 0 unchanged, "
            "1 quarantined, 0 older than believed, 0 embedding calls (hashing), <time>")


def test_with_sweep_triggers_off_the_report_says_how_to_sweep(tmp_path, settings, monkeypatch, hashing_embeddings):
    settings.UNSAY_EMBED_ON_COMMIT = True
    settings.UNSAY_SWEEP_ON_SUPERSESSION = False
    lines = _printed(_file(tmp_path), monkeypatch)
    facts = lines[0].split(", ")[1].split()[0]
    assert lines == [
        _run_line(int(facts)),
        "Snapshot: <file>",
        f"  quarantined 1: {BAD_DATE}",
        "Sweep: none started (UNSAY_SWEEP_ON_SUPERSESSION is off here); run `manage.py sweep` or wait for the "
        "periodic sweep.",
        f"Embeddings: {facts} fact versions wait for their vector (a worker adds them; `manage.py status` shows "
        "the backlog).",
    ]
    assert int(facts) > 2  # every lot of both records is a fact


def test_with_a_broker_the_report_says_the_sweep_is_queued(tmp_path, settings, monkeypatch, hashing_embeddings):
    settings.UNSAY_EMBED_ON_COMMIT = True
    settings.UNSAY_SWEEP_ON_SUPERSESSION = None
    settings.CELERY_TASK_ALWAYS_EAGER = False
    queued = []
    monkeypatch.setattr("corrections.tasks.sweep_facts.delay", lambda ids: queued.append(ids))
    lines = _printed(_file(tmp_path), monkeypatch)
    assert queued
    assert lines[1:4] == [
        "Snapshot: <file>",
        f"  quarantined 1: {BAD_DATE}",
        "Sweep: queued for the Celery worker; watch /recalls/ops/ (or `manage.py sweep --dry-run`).",
    ]


def test_a_sweep_that_ran_is_reported_with_its_counts(tmp_path, settings, monkeypatch, hashing_embeddings):
    """No broker and triggers on: the sweep runs as the facts commit and drafts the holder's notice."""
    settings.UNSAY_EMBED_ON_COMMIT = True
    settings.UNSAY_SWEEP_ON_SUPERSESSION = True
    settings.CELERY_TASK_ALWAYS_EAGER = True
    make_patient("SYN-HOLDER", [(VALSARTAN, LOT)])
    lines = _printed(_file(tmp_path), monkeypatch)
    sweeps = [line for line in lines if line.startswith("Sweep: ")]
    assert len(sweeps) == 1 and lines[3] == sweeps[0]
    assert re.fullmatch(r"Sweep: run N succeeded: examined \d+, corrected 0, reaffirmed \d+, notices drafted 1"
                        r"(; run N succeeded: examined \d+, corrected 0, reaffirmed \d+, notices drafted 0)*",
                        sweeps[0]), sweeps[0]
