"""Where the demo says it runs and where its letters point: the reply links of a demo on UNSAY_PORT (or
--port) reach that server, and the banner names the database's data directory."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from demo import setup as demo_setup
from tests.procs import PROJECT_DIR

LINK_PROBE = r"""
import json
import django
django.setup()
from django.conf import settings
from replies import links
print(json.dumps({"site": settings.UNSAY_SITE_URL, "link": links.url_for("TOKEN")}))
"""


def _addresses(**env_extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"UNSAY_PORT", "UNSAY_SITE_URL", "DATABASE_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="unsay_site.settings", UNSAY_PROFILE="test", PYTHONPATH=str(PROJECT_DIR))
    env.update(env_extra)
    result = subprocess.run([sys.executable, "-c", LINK_PROBE], cwd=PROJECT_DIR, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_reply_links_point_at_the_port_the_demo_serves_on():
    assert _addresses(UNSAY_PORT="8123")["link"] == "http://127.0.0.1:8123/r/TOKEN"
    assert _addresses()["link"] == "http://127.0.0.1:8000/r/TOKEN"


def test_a_configured_public_address_wins_over_the_port():
    seen = _addresses(UNSAY_PORT="8123", UNSAY_SITE_URL="https://pharmacy.example.org/")
    assert seen == {"site": "https://pharmacy.example.org", "link": "https://pharmacy.example.org/r/TOKEN"}


def test_the_demo_names_the_address_its_children_link_to():
    assert demo_setup.site_url({}, 8123) == "http://127.0.0.1:8123"
    assert demo_setup.site_url({"UNSAY_SITE_URL": "https://pharmacy.example.org/"}, 8123) == \
        "https://pharmacy.example.org"


def test_the_database_line_names_the_embedded_data_directory_before_any_connection(settings, tmp_path):
    if not settings.EMBEDDED_DATABASE:
        pytest.skip("DATABASE_URL names a server")
    settings.UNSAY_PGDATA = tmp_path / "pgdata"
    line = demo_setup.database_line()
    assert line == f"embedded PostgreSQL, database {settings.DATABASES['default']['NAME']} in " \
                   f"{Path(tmp_path / 'pgdata').resolve()}"
    assert not line.endswith(" at ")
