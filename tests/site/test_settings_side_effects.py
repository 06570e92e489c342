"""Importing settings (and django.setup(), the Celery app, the WSGI app) starts nothing: no process,
no socket, no embedded PostgreSQL data directory. The embedded server starts on the first database
connection (unsay_site.embedded_backend), and Redis is used only when REDIS_URL names it."""

import json
import os
import subprocess
import sys

import pytest

from tests.procs import PROJECT_DIR

PROBE = r"""
import json, os, socket, subprocess, sys
events = []
real_connect = socket.socket.connect
def connect(self, address):
    events.append(f"socket.connect {address!r}")
    raise OSError("no sockets at import")
socket.socket.connect = connect
socket.socket.connect_ex = lambda self, address: events.append(f"socket.connect_ex {address!r}") or 111
socket.create_connection = lambda *a, **k: (events.append(f"create_connection {a!r}"), (_ for _ in ()).throw(OSError()))
real_popen_init = subprocess.Popen.__init__
def popen(self, *a, **k):
    events.append(f"Popen {a!r}")
    raise OSError("no processes at import")
subprocess.Popen.__init__ = popen
os.fork = lambda: events.append("fork") or (_ for _ in ()).throw(OSError())
os.posix_spawn = lambda *a, **k: events.append("posix_spawn") or (_ for _ in ()).throw(OSError())

import django
from django.conf import settings
settings.DATABASES  # evaluate the settings module
django.setup()
import unsay_site.celery  # noqa: F401  (the worker's entry point)
import unsay_site.wsgi  # noqa: F401  (gunicorn's entry point)
print(json.dumps({"events": events, "engine": settings.DATABASES["default"]["ENGINE"],
                  "broker": settings.CELERY_BROKER_URL, "profile": settings.PROFILE}))
"""


def _probe(tmp_path, **env_extra):
    env = {k: v for k, v in os.environ.items() if k not in {"UNSAY_PROFILE", "REDIS_URL", "DATABASE_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="unsay_site.settings", UNSAY_PGDATA=str(tmp_path / "pgdata"),
               PYTHONPATH=str(PROJECT_DIR))
    env.update(env_extra)
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=PROJECT_DIR, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("env_extra", [
    {},  # a developer's `manage.py ...`: the local profile on the embedded database
    {"UNSAY_PROFILE": "test"},
    {"UNSAY_PROFILE": "demo", "REDIS_URL": "redis://127.0.0.1:6379/13"},
    {"UNSAY_PROFILE": "production", "SECRET_KEY": "k" * 50, "UNSAY_ALLOWED_HOSTS": "unsay.example.org",
     "DATABASE_URL": "postgres://app@db.example:5432/unsay", "REDIS_URL": "redis://redis.example:6379/0"},
], ids=["local", "test", "demo-with-redis", "production"])
def test_importing_settings_opens_no_socket_and_starts_no_process(tmp_path, env_extra):
    seen = _probe(tmp_path, **env_extra)
    assert seen["events"] == []
    assert not (tmp_path / "pgdata").exists(), "the embedded PostgreSQL was initialised at import"
    if "DATABASE_URL" not in env_extra:
        assert seen["engine"] == "unsay_site.embedded_backend"
    assert seen["broker"] == env_extra.get("REDIS_URL", "memory://")


def test_the_default_profile_is_local_on_the_embedded_database_and_production_with_database_url(tmp_path):
    assert _probe(tmp_path)["profile"] == "local"
    env = {k: v for k, v in os.environ.items() if k not in {"UNSAY_PROFILE", "SECRET_KEY"}}
    env.update(DJANGO_SETTINGS_MODULE="unsay_site.settings", DATABASE_URL="postgres://app@db.example/unsay")
    result = subprocess.run([sys.executable, "-c", "from django.conf import settings; settings.DEBUG"],
                            cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "SECRET_KEY is required when UNSAY_PROFILE=production" in result.stderr


@pytest.mark.django_db
def test_the_first_connection_starts_the_embedded_server_and_fills_in_its_socket():
    from django.conf import settings
    from django.db import connection

    if not settings.EMBEDDED_DATABASE:
        pytest.skip("DATABASE_URL names a server: nothing embedded")
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        # pytest-xdist gives each worker its own test database: the name ends with the worker's id.
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        assert cursor.fetchone()[0] == (f"{settings.TEST_DB_NAME}_{worker}" if worker else settings.TEST_DB_NAME)
    assert os.path.isdir(connection.settings_dict["HOST"])  # the server's Unix socket directory
    assert int(connection.settings_dict["PORT"]) > 0


def test_sentry_is_initialised_only_with_a_dsn_and_without_personal_data(tmp_path):
    code = ("import json, sentry_sdk; from django.conf import settings; settings.DEBUG; c = sentry_sdk.get_client(); "
            "print(json.dumps({'active': c.is_active(), 'pii': c.options.get('send_default_pii'), "
            "'bodies': c.options.get('max_request_body_size')}))")
    results = {}
    for label, dsn in (("without", ""), ("with", "https://public@sentry.example/1")):
        env = {k: v for k, v in os.environ.items() if k != "SENTRY_DSN"}
        env.update(DJANGO_SETTINGS_MODULE="unsay_site.settings", UNSAY_PROFILE="test", UNSAY_PGDATA=str(tmp_path),
                   SENTRY_DSN=dsn, PYTHONPATH=str(PROJECT_DIR))
        result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, env=env, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        results[label] = json.loads(result.stdout.strip().splitlines()[-1])
    assert results["without"]["active"] is False
    assert results["with"] == {"active": True, "pii": False, "bodies": "never"}
