"""Helpers for tests that run real processes against the test database."""

import os
import subprocess
import sys
from urllib.parse import urlparse, urlunparse

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
