"""Structured logs: every line of a request is one JSON object carrying the request id, stdlib log
lines included; the admin search's ?q= (which can be a patient's name) never reaches a log line."""

import json
import logging

import pytest
from django.test import Client

from tests.factories import make_patient
from unsay_site import logs

pytestmark = pytest.mark.django_db


def render(records) -> list[dict]:
    config = logs.formatter("json")
    formatter = config.pop("()")(**config)
    return [json.loads(formatter.format(record)) for record in records]


def test_request_lines_are_json_with_a_request_id_and_no_query_string(caplog, django_user_model, settings):

    make_patient("SYN-LOG", name="Synthetic Wilhelmina Quist", email="wq@example.com", phone="")
    admin = django_user_model.objects.create_superuser("log-admin", password="x" * 16)
    client = Client()
    client.force_login(admin)
    caplog.set_level(logging.INFO, logger="django_structlog")
    caplog.set_level(logging.INFO)
    response = client.get("/admin/patients/patient/", {"q": "Wilhelmina Quist"})
    assert response.status_code == 200
    lines = render(caplog.records)
    finished = [line for line in lines if line["event"] == "request_finished"]
    assert finished and finished[0]["request"] == "GET /admin/patients/patient/?<query omitted>"
    assert finished[0]["code"] == 200 and finished[0]["request_id"]
    assert all("Wilhelmina" not in json.dumps(line) and "wq@example.com" not in json.dumps(line) for line in lines)
    assert "ip" not in finished[0] and "user_agent" not in finished[0]


def test_stdlib_log_lines_carry_the_bound_request_or_task_id(caplog):
    import structlog

    caplog.set_level(logging.INFO)
    structlog.contextvars.bind_contextvars(task_id="task-123")
    try:
        logging.getLogger("corrections.sweep").info("sweep page %d", 3)
        [line] = [line for line in render(caplog.records) if line["logger"] == "corrections.sweep"]
    finally:
        structlog.contextvars.clear_contextvars()
    assert line["event"] == "sweep page 3" and line["task_id"] == "task-123" and line["level"] == "info"


def test_django_request_warnings_carry_no_query_string(caplog):
    """Django's own request warnings (404, 403, 500) pass the HttpRequest as `request`: rendered, it
    would show the full path with ?q=<what was searched>."""
    caplog.set_level(logging.WARNING, logger="django.request")
    response = Client().get("/no-such-page/", {"q": "Synthetic Wilhelmina Quist"})
    assert response.status_code == 404
    lines = [line for line in render(caplog.records) if line.get("logger") == "django.request"]
    assert lines, "Django logged no warning for the 404"
    assert all("Wilhelmina" not in json.dumps(line) for line in lines), lines
    assert lines[0]["request"] == "GET /no-such-page/?<query omitted>"


def test_a_request_line_in_any_message_loses_its_query_string(caplog):
    """runserver logs "GET /admin/...?q=<name> HTTP/1.1" through django.server (not django_structlog):
    the handler's filter takes the query out of the message, and drops the socket `request` extra."""
    import socket

    record = logging.LogRecord("django.server", logging.INFO, __file__, 1, '"%s" %s %s',
                               ("GET /admin/patients/patient/?q=Wilhelmina+Quist HTTP/1.1", "200", "123"), None)
    record.request = connection = socket.socket()
    try:
        assert logs.RedactQueryStrings().filter(record)
    finally:
        connection.close()
    [line] = render([record])
    assert line["event"] == '"GET /admin/patients/patient/?<query omitted> HTTP/1.1" 200 123'
    assert "request" not in line and "Quist" not in json.dumps(line)


def test_a_rendered_line_carries_no_credential_in_its_fields_or_its_traceback():
    """The formatter masks what it renders (core.log_filters.mask_event_dict), after the traceback is text."""
    key = "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f"
    try:
        raise ConnectionError(f"Max retries exceeded with url: /drug/enforcement.json?limit=1&api_key={key}")
    except ConnectionError as exc:
        failed = logging.LogRecord("recalls.tasks", logging.ERROR, __file__, 1, "ingest failed for %s", ("/r/Q2hh",),
                                   (type(exc), exc, exc.__traceback__))
    [line] = render([failed])
    assert line["event"] == "ingest failed for /r/***"
    assert "api_key=***" in line["exception"] and key not in json.dumps(line)
