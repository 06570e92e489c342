"""No query strings, no patient data and no credential in any log line of a full demo run
(`django.request` warnings would otherwise log `?q=<patient name>`).

`manage.py demo` runs for real, as `make demo` does: migrate, the demo logins, load_demo (ingest the
demo slice, seed the synthetic patients, the story: ask, escalate, sweep), then the web server, a
Celery worker and beat. A pharmacist then logs in and searches for a patient by name on the ask
screen and in the admin, opens a missing page with the name in its query string, opens the review
queue and approves every draft; the worker dispatches the letters. Each patient then opens the reply
link of their letter (and one answers through it), a forged link is tried, and a pharmacy calls the API
with its key. Everything every process wrote (stdout and stderr of the demo and its children, gunicorn's
access log, Django's request warnings and the structured request lines included) is then read for any
synthetic patient's name, email, phone or reference, any reply token or API key, and for a query string.
"""

import quopri
import re
import signal
import subprocess
import sys
import time
import uuid
from urllib.parse import quote_plus

import pytest
import requests

from ask.keys import issue_key
from ask.models import ApiClient
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


def reply_tokens(var_dir) -> set[str]:
    """The reply tokens of every letter and SMS the demo sent (its file backends write them under var/)."""
    tokens = set()
    for path in [*(var_dir / "mail").glob("*"), *(var_dir / "sms").glob("*")]:
        raw = path.read_bytes()
        for text in (raw, quopri.decodestring(raw)):
            tokens |= set(re.findall(r"/r/([A-Za-z0-9_-]{22})", text.decode(errors="replace")))
    return tokens


def use_the_reply_links(base, tokens) -> None:
    """Every patient opens their link; the first answers through it; a forged link is refused."""
    for token in sorted(tokens):
        assert requests.get(f"{base}/r/{token}", timeout=60).status_code in (200, 404)  # a used link is refused
    answered = requests.post(f"{base}/r/{sorted(tokens)[0]}", data={"answer": "question", "text": "When?"},
                             timeout=60)
    assert answered.status_code < 500, answered.text[-2000:]
    assert requests.get(f"{base}/r/{'F' * 22}", timeout=60).status_code == 404


def use_an_api_key(base) -> str:
    """A pharmacy's key on the API, and a forged key: the key's secret."""
    _, secret = issue_key(ApiClient.objects.create(name="Demo logs pharmacy (synthetic)"))
    bearer = {"Authorization": f"Bearer {secret}"}
    assert requests.get(f"{base}/api/v1/decisions/{uuid.uuid4()}", headers=bearer, timeout=60).status_code == 404
    forged = {"Authorization": "Bearer usk_" + "f" * 43}
    assert requests.get(f"{base}/api/v1/decisions/{uuid.uuid4()}", headers=forged, timeout=60).status_code == 401
    return secret


def test_a_full_demo_run_logs_no_query_string_no_patient_data_and_no_credential(tmp_path):
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
        tokens = reply_tokens(tmp_path / "var")
        assert tokens, "no reply link in the letters the demo sent"
        use_the_reply_links(base, tokens)
        secrets = {use_an_api_key(base), "usk_" + "f" * 43}
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
    # A reply token is a patient's credential, an API key a pharmacy's. demo_reply prints one link on
    # purpose (for the person trying the demo to answer in a browser): that line is the demo's own
    # instructions, not a log line.
    credentials = secrets | tokens | {"F" * 22}
    assert any(f"/r/{token}" in text for token in tokens), "demo_reply's link was not printed"
    log_lines = [line for line in text.splitlines() if not line.startswith("Answer the other letter yourself")]
    logged = "\n".join(log_lines)
    # gunicorn's access log, the structured request lines and Django's warning: each logged, masked
    for line in ('"GET /r/*** HTTP/1.1" 200', "request_finished", "request='GET /r/***'", "Not Found: /r/***"):
        assert line in logged, f"no {line!r} in the logs"
    exposed = [line for line in log_lines if any(value in line for value in credentials)]
    assert exposed == [], "\n".join(exposed[:20])
    query_strings = [line for line in text.splitlines() if re.search(r"\?[\w%.+-]+=", line)]
    assert query_strings == [], "\n".join(query_strings[:20])
