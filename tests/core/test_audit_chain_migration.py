"""The migration that builds the one keyed chain (worklist 0004) links the events already on file in all
four audited tables in the order they were written (time, then id), and the result verifies; a database
with events refuses to migrate without a key rather than leave them unchained. Runs in a scratch database
(a child process migrates it step by step). The patient is synthetic."""

import json

import pytest

from tests.procs import run_python, scratch_database_name

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

BEFORE = [("corrections", "0019_auditevent_erased_key_refused"), ("patients", "0010_lot_field_read"),
          ("shelf", "0002_refused_events_take_no_key"), ("worklist", "0002_patient_answers_and_tasks")]

SCRIPT = """
import json
from datetime import datetime, timedelta, UTC
from io import StringIO
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

before = {before!r}
executor = MigrationExecutor(connection)
executor.migrate(before)
old = executor.loader.project_state(before).apps
user = old.get_model("unsay_site", "User").objects.create(username="phil-synthetic")
patient = old.get_model("patients", "Patient").objects.create(
    region="aws-us-east-1", display_name="Synthetic Mig", external_ref="SYN-MIG", synthetic=True)
t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
# Written out of time order on purpose: the chain follows the time each event happened.
made = [
    ("worklist", "WorkEvent", 3, dict(actor=user, actor_label="phil", action="contact", recall_number="D-1",
                                      patient=patient, details={{"note": "left a message"}})),
    ("corrections", "AuditEvent", 1, dict(actor=user, actor_label="phil", action="approved",
                                          after={{"status": "approved"}}, seq=1, content_hash="old", link_hash="old")),
    ("patients", "DispensingChange", 2, dict(actor_label="csv", action="created", patient=patient,
                                             region="aws-us-east-1", dispensing_id=7, after={{"lot": "ABC123"}})),
    ("shelf", "ShelfEvent", 4, dict(actor=user, actor_label="phil", action="quarantined", site="Main St",
                                    recall_number="D-1", details={{"expected": 2, "counted": 2}})),
]
order = {{}}
for app, name, minutes, fields in made:
    model = old.get_model(app, name)
    row = model.objects.create(**fields)
    model.objects.filter(pk=row.pk).update(at=t0 + timedelta(minutes=minutes))
    order[minutes] = model._meta.db_table
call_command("migrate", verbosity=0)
out = StringIO()
call_command("verify_audit", stdout=out)
links = list(connection.cursor().execute("SELECT event_table FROM core_auditlink ORDER BY seq").fetchall())
print(json.dumps({{"verify": out.getvalue(), "links": [t for (t,) in links],
                  "expected": [order[m] for m in sorted(order)]}}))
"""


def test_existing_events_of_every_table_are_chained_in_the_order_written():
    with scratch_database_name("audit_mig") as database:
        done = run_python(SCRIPT.format(before=BEFORE), timeout=600, UNSAY_DB_NAME=database)
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "audit chain intact: 4 links verified" in result["verify"]
    assert result["links"] == result["expected"] == [
        "corrections_auditevent", "patients_dispensingchange", "worklist_workevent", "shelf_shelfevent"]


def test_events_on_file_are_not_left_unchained_when_no_key_is_configured():
    code = SCRIPT.format(before=BEFORE).split("call_command(\"migrate\", verbosity=0)")[0] + (
        "from django.conf import settings\n"
        "settings.UNSAY_AUDIT_KEY_ID = ''\n"
        "call_command('migrate', verbosity=0)\n")
    with scratch_database_name("audit_mig") as database:
        done = run_python(code, timeout=600, UNSAY_DB_NAME=database)
    assert done.returncode != 0
    assert "Set UNSAY_AUDIT_KEY before migrating: the audit events on file are chained with it" in done.stderr
