"""No query strings and no patient data in any log line of a full demo run (`django.request`
warnings would otherwise log `?q=<patient name>`).

`manage.py demo` runs for real, as `make demo` does: migrate, the demo logins, load_demo (ingest the
demo slice, seed the synthetic patients, the story: ask, escalate, sweep), then the web server, a
Celery worker and beat. A pharmacist then logs in and searches for a patient by name on the ask
screen and in the admin, opens a missing page with the name in its query string, opens the review
queue and approves every draft; the worker dispatches the letters. Everything every process wrote
(stdout and stderr of the demo and its children, request lines included) is then read for any
synthetic patient's name, email, phone or reference, and for a query string.
"""

import re
import signal
import subprocess
import sys
import time
from urllib.parse import quote_plus

import pytest
import requests

from corrections.models import Correction, OutboxMessage
from demo import setup as demo_setup
from patients.models import Patient
from tests.procs import PROJECT_DIR, subprocess_env
from tests.reliability.servers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "demo-logs-" + "x" * 12


def wait_for_text(path, text, proc, timeout):
    deadline = time.monotonic() + timeout
    while text not in path.read_text(errors="replace"):
        assert proc.poll() is None, path.read_text(errors="replace")[-4000:]
        assert time.monotonic() < deadline, f"no {text!r} within {timeout}s: {path.read_text()[-4000:]}"
        time.sleep(0.5)


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def login(base) -> requests.Session:
    session = requests.Session()
    session.get(f"{base}/admin/login/", timeout=30)
    answer = session.post(f"{base}/admin/login/", timeout=30, allow_redirects=False,
                          data={"username": "pharmacist", "password": PASSWORD, "next": "/",
                                "csrfmiddlewaretoken": session.cookies["csrftoken"]})
    assert answer.status_code == 302, answer.text[-2000:]
    session.headers["X-CSRFToken"] = session.cookies["csrftoken"]
    session.headers["Referer"] = base + "/"
    return session


def test_a_full_demo_run_logs_no_query_string_and_no_patient_data(tmp_path):
    redis_url, redis_proc = demo_setup.start_embedded_redis(tmp_path)  # a private broker for the worker
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "demo.log"
    env = subprocess_env(REDIS_URL=redis_url, UNSAY_DEMO_PASSWORD=PASSWORD, UNSAY_VAR_DIR=str(tmp_path / "var"),
                         UNSAY_LOG_REQUESTS="1", UNSAY_LOG_LEVEL="DEBUG", PYTHONUNBUFFERED="1")
    with log.open("w") as out:
        demo = subprocess.Popen([sys.executable, "manage.py", "demo", "--port", str(port)], cwd=PROJECT_DIR,
                                env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_text(log, "Unsay demo is up", demo, 900)
        patients = list(Patient.objects.all())
        assert len(patients) >= 12 and Correction.objects.exists()
        name = patients[0].display_name

        session = login(base)
        assert session.post(f"{base}/memory/ask/", data={"q": name}, timeout=60).status_code == 200
        assert session.get(f"{base}/memory/ask/", params={"q": name}, timeout=60).status_code == 200
        assert session.get(f"{base}/admin/patients/patient/", params={"q": name}, timeout=60).status_code == 200
        assert session.get(f"{base}/admin/patients/patient/", params={"q": patients[1].email},
                           timeout=60).status_code == 200
        assert session.get(f"{base}/no-such-page/", params={"q": name}, timeout=60).status_code == 404
        assert session.get(f"{base}/corrections/review/", timeout=60).status_code == 200
        recalls = set(Correction.objects.pending_review().values_list("recall_number", flat=True))
        for recall_number in recalls:
            url = f"{base}/corrections/review/recall/{recall_number}/approve-all/"
            assert session.get(url, timeout=60).status_code == 200  # the confirmation page lists the drafts
            ids = list(Correction.objects.pending_review().filter(recall_number=recall_number)
                       .values_list("id", flat=True))
            done = session.post(url, data={"confirm": "on", "ids": ids}, timeout=120)
            assert done.status_code in (200, 302), done.text[-2000:]
        assert not Correction.objects.pending_review().exists()

        from unsay_site.celery import app  # the worker sends what was approved

        with app.connection_for_write(redis_url) as conn:
            app.send_task("corrections.tasks.dispatch_outbox", connection=conn)
        wait_until(lambda: not OutboxMessage.objects.exclude(status__in=["sent", "failed", "unknown"]).exists(),
                   120, "the outbox was not dispatched")
        assert OutboxMessage.objects.filter(status="sent").exists()
    finally:
        if demo.poll() is None:
            demo.send_signal(signal.SIGINT)
            try:
                demo.wait(120)
            except subprocess.TimeoutExpired:
                demo.kill()
                demo.wait(30)
        demo_setup.stop_children({"redis": redis_proc})

    text = log.read_text(errors="replace")
    assert "request_finished" in text and "/no-such-page/" in text, "the request lines were not logged"
    assert "--- Logging error ---" not in text, text[text.index("--- Logging error ---"):][:3000]
    phi = set()
    for patient in Patient.objects.all():
        phi |= {patient.display_name, patient.email, patient.phone, patient.external_ref}
    phi = {value for value in phi if value}
    forms = phi | {quote_plus(value) for value in phi} | {quote_plus(value).replace("+", "%20") for value in phi}
    leaks = [line for line in text.splitlines() if any(value in line for value in forms)]
    assert leaks == [], "\n".join(leaks[:20])
    query_strings = [line for line in text.splitlines() if re.search(r"\?[\w%.+-]+=", line)]
    assert query_strings == [], "\n".join(query_strings[:20])
