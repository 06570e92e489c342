"""No patient data in any log line: not in the failing INSERT PostgreSQL logs for a concurrent sweep's
"already handled" unique violation (letter text "Dear <name>, ..."), not in the ask screen's URLs,
not in demo_story's output. This runs the story (ingest with a bad
record, ask, sweep, a concurrent sweep's duplicate insert, approve, dispatch, the ask screen's
search, a CSV import with errors, an admin search by name) with every application logger at DEBUG
and reads the database server's own log.

No credential either: a patient's reply token, a pharmacy's API key and the openFDA API key are read
from what the configured handler (settings.LOGGING, its filters and formatter) writes, every logger at
DEBUG: the request lines, Django's request warnings, runserver's lines and urllib3's retries
(core/log_filters.py; gunicorn's own logs: tests/demo/test_demo_logs.py)."""

import copy
import io
import logging
import re
import uuid
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, transaction

from ask.keys import issue_key
from ask.models import ApiClient
from core import embedded
from corrections.models import Correction
from corrections.review import approve
from corrections.sweep.run import sweep
from outbox.dispatch import dispatch_ready
from patients.models import Patient
from recalls.openfda import OpenFDAClient, OpenFDAError
from recalls.services import ingest_document
from tests.factories import escalate
from tests.reliability.openfda_records import unique_good_records
from tests.reliability.servers import free_port

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


def server_log():
    return embedded.default_pgdata(settings.BASE_DIR) / "log"


def patient_data():
    values = set()
    for patient in Patient.objects.all():
        values |= {patient.display_name, patient.email, patient.phone}
    return {v for v in values if v}


def test_the_whole_story_logs_no_patient_name_or_contact(client, world, people, no_auto_sweep, caplog,
                                                          tmp_path, settings):
    settings.EMAIL_FILE_PATH = str(tmp_path / "mail")
    log_path = server_log()
    start = log_path.stat().st_size if log_path.exists() else 0
    caplog.set_level(logging.DEBUG)

    bad = copy.deepcopy(unique_good_records()[0])
    bad["recalling_firm"] = "Firm\x00"
    ingest_document({"results": [bad, unique_good_records()[1]]})
    escalate()
    report = sweep()
    assert report.corrected >= 2
    # A second sweep that lost the race: its INSERT of the same draft hits the unique dedupe key.
    draft = Correction.objects.filter(kind="correction").select_related("patient").first()
    assert draft.patient.display_name in draft.drafted_text  # the letter names the patient
    duplicate = Correction(kind=draft.kind, patient=draft.patient, match=draft.match, new_verdict=draft.new_verdict,
                           new_answer=draft.new_answer, drafted_text=draft.drafted_text, dedupe_key=draft.dedupe_key)
    with pytest.raises(IntegrityError), transaction.atomic():
        duplicate.save()
    for correction_id in Correction.objects.values_list("id", flat=True):
        approve(correction_id, user=people["pharmacist"])
    dispatch_ready()
    client.force_login(people["pharmacist"])
    assert client.post("/memory/ask/", {"q": "Synthetic"}).status_code == 200
    # A CSV import with a bad row for a real patient (the row is refused, the reason is shown), and an
    # admin search by a patient's name: neither may put the name or contact into a log line.
    patient = Patient.objects.exclude(email="").first()
    people["pharmacist"].is_staff = True  # the admin's pages
    people["pharmacist"].save(update_fields=["is_staff"])
    client.force_login(people["pharmacist"])
    csv = (f"patient_ref,drug,product_description,ndc,lot,expiry,quantity,dispensed_at,site\n"
           f"{patient.external_ref},valsartan,{patient.display_name} {patient.email},12345,,,0,2099-01-01,\n")
    upload = SimpleUploadedFile("dispensing.csv", csv.encode(), content_type="text/csv")
    refused = client.post("/admin/patients/dispensingrecord/import/", {"file": upload})
    assert refused.status_code == 400 and "Bad NDC" in refused.content.decode()  # refused, explained
    assert client.get("/admin/patients/patient/", {"q": patient.display_name}).status_code == 200

    app_lines = [record.getMessage() for record in caplog.records]
    database_lines = log_path.read_text(errors="replace")[start:].splitlines() if log_path.exists() else []
    assert any("duplicate key value violates unique constraint" in line for line in database_lines), \
        "the reproduction did not reach the server log"
    leaks = [(where, line) for where, lines in (("app", app_lines), ("database", database_lines)) for line in lines
             if any(value in line for value in patient_data())]
    assert leaks == []


def test_the_embedded_server_does_not_log_failing_statements():
    from django.db import connection

    with connection.cursor() as cursor:
        for name, value in embedded.SERVER_LOG_SETTINGS.items():
            cursor.execute("SELECT setting FROM pg_settings WHERE name = %s", [name])
            assert cursor.fetchone()[0] == value, name



@contextmanager
def configured_log_output():
    """Everything the configured console handler writes (its own filters and formatter), with every
    logger that might carry a credential at DEBUG."""
    [handler] = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    stream = io.StringIO()
    previous_stream = handler.setStream(stream)
    names = ["", "django_structlog", "django.request", "django.server", "urllib3"]
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        handler.setStream(previous_stream)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def test_reply_tokens_and_api_keys_never_reach_a_log_line(client, drafts, people):
    from django.core import mail

    approve(drafts["SYN-A"].pk, user=people["pharmacist"])
    dispatch_ready()
    token = re.search(r"/r/([A-Za-z0-9_-]{22})", mail.outbox[0].body).group(1)
    forged = "F" * 22
    _, secret = issue_key(ApiClient.objects.create(name="North (synthetic)"))
    forged_secret = "usk_" + "f" * 43

    with configured_log_output() as output:
        assert client.get(f"/r/{token}").status_code == 200
        assert client.post(f"/r/{token}", {"answer": "question", "text": "When?"}).status_code < 500
        assert client.get(f"/r/{forged}").status_code == 404  # Django's "Not Found: <path>" warning
        missing = f"/api/v1/decisions/{uuid.uuid4()}"
        assert client.get(missing, HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 404
        assert client.get(missing, HTTP_AUTHORIZATION=f"Bearer {forged_secret}").status_code == 401
        # runserver's request line (django.server), and a header logged by a library or by mistake
        logging.getLogger("django.server").info('"%s" %s %s', f"GET /r/{token} HTTP/1.1", "200", "512")
        logging.getLogger("tests").debug("sending %s", {"Authorization": f"Bearer {secret}"})

    text = output.getvalue()
    assert "request_finished" in text and "Not Found" in text and "/r/***" in text, text[-3000:]
    exposed = [line for line in text.splitlines()
               if any(value in line for value in (token, forged, secret, forged_secret))]
    assert exposed == [], "\n".join(exposed)


def test_the_openfda_api_key_never_reaches_a_log_line():
    """urllib3 logs each retry with the URL it retries, api_key and all."""
    key = "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f"
    client = OpenFDAClient(base_url=f"http://127.0.0.1:{free_port()}", api_key=key, attempts=3,
                           sleep=lambda seconds: None)
    with configured_log_output() as output, pytest.raises(OpenFDAError) as refused:
        client.get("/drug/enforcement.json", {"limit": 1})
    assert key not in str(refused.value)  # the client's own message
    text = output.getvalue()
    assert "Retrying" in text and "api_key=***" in text, text[-3000:]
    assert key not in text, "\n".join(line for line in text.splitlines() if key in line)
