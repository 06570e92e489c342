"""A fact followed from ingestion to the outbox goes up a layer only through an announced callback
(docs/adr/0006-calls-go-up-only-through-announced-callbacks.md).

bench/fact_walk.py traces the real recall D-0809-2021 from `recalls.services.ingest_file` through the
sweep (set-based pages, then the per-decision path) to a pharmacist's approval and the dispatch its
commit sets off. Every call from a lower layer into a higher one it records must land in a function
listed below with the mechanism that calls it; a new climb fails here until it is either removed or
registered through one of those mechanisms and listed. An entry no path climbs to any more fails too,
so the list says what the code does."""

import json
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

from tests.procs import PROJECT_DIR, drop_database_beside, subprocess_env

pytestmark = pytest.mark.slow

ON_COMMIT = "a transaction.on_commit hook, run when core.retry's transaction commits"
FACTS_CHANGED = "a receiver of memory.signals.facts_changed"
CELERY = "Celery, run eagerly by core.enqueue.send (a worker in production)"
SETTINGS = "installed by settings, called by Django or logging"

ANNOUNCED = {
    "memory/fact_writes.py:__call__": ON_COMMIT + " (memory's supersession batch, which sends facts_changed)",
    "shelf/tasks.py:queue_shelf_match_after_facts": FACTS_CHANGED,
    "corrections/tasks.py:enqueue_sweep_after_supersessions": FACTS_CHANGED,
    "outbox/tasks.py:dispatch_outbox": CELERY + ", the task queued by name after a review commits",
    "unsay_site/celery.py:_pool_process_stops_between_pages": CELERY + ", its task_prerun signal",
    "unsay_site/embedded_backend/base.py:get_connection_params": SETTINGS + " (DATABASES: the database backend)",
    "unsay_site/logs.py:filter": SETTINGS + " (LOGGING: a log filter)",
    "unsay_site/logs.py:redact": SETTINGS + " (LOGGING: a log filter)",
    "unsay_site/templatetags/__init__.py:<module>": SETTINGS + " (TEMPLATES: tag libraries loaded on first render)",
    "unsay_site/templatetags/unsay.py:<module>": SETTINGS + " (TEMPLATES: tag libraries loaded on first render)",
    "worklist/templatetags/__init__.py:<module>": SETTINGS + " (TEMPLATES: tag libraries loaded on first render)",
    "worklist/templatetags/shelf_tags.py:<module>": SETTINGS + " (TEMPLATES: tag libraries loaded on first render)",
    "worklist/templatetags/glance_tags.py:<module>": SETTINGS + " (TEMPLATES: tag libraries loaded on first render)",
    "replies/links.py:footer": "a footer registered in outbox.dispatch.SEND_FOOTERS by replies' AppConfig.ready",
}


@pytest.fixture
def walk_database():
    """The walk empties and fills a database of its own, next to this worker's test database."""
    if not settings.EMBEDDED_DATABASE:
        pytest.skip("runs on the embedded server (DATABASE_URL names another)")
    connection.ensure_connection()
    name = connection.settings_dict["NAME"] + "_walk"
    yield name
    drop_database_beside(name)


def walk(path: str, database: str, out) -> dict:
    argv = [sys.executable, "bench/fact_walk.py", "--out", str(out)]
    if path == "per-decision":
        argv.append("--per-decision")
    finished = subprocess.run(argv, cwd=PROJECT_DIR, env=subprocess_env(UNSAY_DB_NAME=database),
                              capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["sweep"] == path
    return report


def callees(report: dict, kind: str) -> dict[str, str]:
    """callee -> one caller that reached it, over every stage."""
    found = {}
    for stage in report["stages"].values():
        for pair in stage[kind]:
            caller, callee = pair.split(" -> ")
            found.setdefault(callee, caller)
    return found


@pytest.mark.django_db
def test_a_fact_goes_up_a_layer_only_through_an_announced_callback(walk_database, tmp_path):
    climbed = {}
    for path in ("set-based", "per-decision"):
        report = walk(path, walk_database, tmp_path / f"{path}.json")
        assert sum(len(stage["files"]) for stage in report["stages"].values()) > 0
        climbed.update(callees(report, "climbs"))
        # What a higher-order function calls is the function it was handed (core.retry running `fn`).
        for callee, caller in callees(report, "handed_down").items():
            assert caller.startswith("core/retry.py:"), f"{caller} -> {callee}: handed down by something new"

    unannounced = {callee: caller for callee, caller in climbed.items() if callee not in ANNOUNCED}
    assert not unannounced, (
        "calls that climb a layer outside an announced callback (caller shown): "
        + ", ".join(f"{caller} -> {callee}" for callee, caller in unannounced.items()))
    stale = sorted(set(ANNOUNCED) - set(climbed))
    assert not stale, f"listed but no longer reached by a climb (remove them from ANNOUNCED): {stale}"
