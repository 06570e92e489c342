"""Helpers for tests that run real processes against the test database."""

import contextlib
import os
import subprocess
import sys
import uuid
from urllib.parse import urlparse, urlunparse

import pytest
from django.db import connection

from tests.paths import PROJECT_DIR


def subprocess_env(**extra) -> dict:
    """Environment for a child process whose Django talks to *this* test session's database."""
    env = os.environ.copy()
    env["UNSAY_PROFILE"] = "test"
    env["DJANGO_SETTINGS_MODULE"] = "unsay_site.settings"
    name = connection.settings_dict["NAME"]
    if env.get("DATABASE_URL"):
        parsed = urlparse(env["DATABASE_URL"])
        env["DATABASE_URL"] = urlunparse(parsed._replace(path="/" + name))
    else:
        env["UNSAY_DB_NAME"] = name
    env["PYTHONPATH"] = str(PROJECT_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_python(code: str, *, timeout=120, **env_extra) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with Django set up against the test database."""
    prelude = "import django; django.setup()\n"
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=PROJECT_DIR, env=subprocess_env(**env_extra),
                          capture_output=True, text=True, timeout=timeout)


def start_python(code: str, **env_extra) -> subprocess.Popen:
    prelude = "import django; django.setup()\n"
    return subprocess.Popen([sys.executable, "-c", prelude + code], cwd=PROJECT_DIR, env=subprocess_env(**env_extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def manage(*args, timeout=300, **env_extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT_DIR, env=subprocess_env(**env_extra),
                          capture_output=True, text=True, timeout=timeout)


def drop_database_beside(name: str) -> None:
    """Drop a database that a test's child processes made on this test session's server (closing
    their connections)."""
    import psycopg

    s = connection.settings_dict
    with psycopg.connect(host=s["HOST"], port=s["PORT"], user=s["USER"], dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def scratch_database_name(prefix: str):
    """The name of a database that child processes create on this session's embedded server, dropped
    afterwards (skips the test when the session runs on another server)."""
    from django.conf import settings

    if not settings.EMBEDDED_DATABASE:
        pytest.skip("creates a scratch database on the embedded server (DATABASE_URL names another)")
    connection.ensure_connection()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        drop_database_beside(name)


def command_line_env(database: str, var_dir, *, demo_password: str) -> dict:
    """The environment documented command lines run in, as a new user's shell would: none of this
    session's UNSAY_ settings, Redis or database URL, but its embedded server, and offline embeddings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("UNSAY_") and k not in {"REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(UNSAY_DB_NAME=database, UNSAY_VAR_DIR=str(var_dir), UNSAY_EMBEDDINGS="hashing",
               UNSAY_ALLOW_FAKE_EMBEDDINGS="1", UNSAY_DEMO_PASSWORD=demo_password)
    if os.environ.get("UNSAY_PGDATA"):
        env["UNSAY_PGDATA"] = os.environ["UNSAY_PGDATA"]
    return env
