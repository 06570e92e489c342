"""bench/recall_to_queue.py at a tiny scale: a real new recall reaches the review queue as exactly one
draft for every patient holding one of its lots, and none for anyone else."""

import json
import subprocess
import sys

import pytest
from django.conf import settings

from tests.procs import PROJECT_DIR, subprocess_env

pytestmark = pytest.mark.slow


def test_every_affected_patient_gets_exactly_one_draft_and_no_one_else_any(tmp_path):
    out = tmp_path / "recall_to_queue.json"
    database = settings.DATABASES["default"]["TEST"]["NAME"] + "_r2q"  # the bench builds its own world here
    env = subprocess_env()
    env.pop("UNSAY_DB_NAME", None)
    sizes = ["--patients", "200", "--decisions", "1000", "--affected", "50", "--warmup", "0", "--sweep", "inline",
             "--db-name", database]

    def bench(*args, out):
        finished = subprocess.run([sys.executable, "bench/recall_to_queue.py", *sizes, *args, "--out", str(out)],
                                  cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=900)
        assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
        return finished.stdout

    # As a large world is measured: built once with no counted run, then measured by a later invocation.
    built = tmp_path / "built.json"
    assert "No counted runs" in bench("--runs", "0", out=built)
    assert json.loads(built.read_text())["runs"] == []
    assert "Reusing the world built earlier" in bench("--runs", "1", "--keep", out=out)

    [run] = json.loads(out.read_text())["runs"]
    assert run["affected_patients"] == 50
    assert run["affected_with_one_draft"] == 50
    assert run["affected_without_draft"] == 0
    assert run["affected_with_several_drafts"] == 0
    assert run["unaffected_with_a_draft"] == 0
    assert run["drafts_written"] == run["drafts_in_review_queue"] == 50
    assert run["errors"] == 0
    # The CPU split: the ingest and the inline sweep ran in the bench process, so it spent CPU, and no
    # process is counted as spending more than the whole machine did (one clock tick of slack). The
    # ceiling of 50 drafts' rows takes milliseconds, so only its presence is checked.
    cpu = run["cpu_s"]
    assert cpu["bench"] > 0
    assert cpu["machine"] >= cpu["bench"] - 0.02
    assert run["ceiling_machine_cpu_s"] >= 0
    # Both references were taken: the same rows into unlogged and into logged copies of the tables.
    assert run["ceiling_s"] > 0 and run["ceiling_logged_s"] > 0
    assert run["ratio_logged_ceiling_to_actual"] > 0
