"""CockroachDB: the compose cluster's shape (always checked, from the files) and, with a real cluster at
UNSAY_COCKROACH_URL (`cockroach`-marked, skipped otherwise), migrate + status + the retry helper there.

The live tests run the app in child processes with DATABASE_URL pointing at a throwaway database on
the cluster, so this test session keeps its own embedded PostgreSQL.
"""

import json
import os
import re
import subprocess
import sys
import uuid
from urllib.parse import urlparse, urlunparse

import pytest
from django.conf import settings

from tests.paths import PROJECT_DIR
from unsay_site.checks import KNOWN_REGIONS
from unsay_site.settings import _database_from_url

REGIONS = ["aws-us-east-1", "aws-eu-west-1", "aws-ap-southeast-1"]


def compose():
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((PROJECT_DIR / "compose.yaml").read_text())


def test_compose_runs_nine_nodes_three_per_region_in_distinct_zones():
    services = compose()["services"]
    nodes = {name: spec for name, spec in services.items() if re.fullmatch(r"roach\d", name)}
    assert len(nodes) == 9
    localities, joins = [], set()
    for name, spec in nodes.items():
        command = spec["command"]
        assert command.startswith("start ") and "--insecure" in command
        assert f"--listen-addr={name}:26357" in command and f"--advertise-addr={name}:26357" in command
        assert f"--sql-addr={name}:26257" in command
        localities.append(re.search(r"--locality=region=([\w-]+),zone=([\w-]+)", command).groups())
        joins.add(re.search(r"--join=(\S+)", command).group(1))
    assert sorted({region for region, _ in localities}) == sorted(REGIONS)
    assert all(sum(1 for r, _ in localities if r == region) == 3 for region in REGIONS)
    assert len({zone for _, zone in localities}) == 9 and all(zone.startswith(region) for region, zone in localities)
    # One join list for all, naming a node in each region.
    assert joins == {"roach1:26357,roach4:26357,roach7:26357"}


def test_compose_inits_the_cluster_then_bootstraps_then_runs_the_app():
    services = compose()["services"]
    init_script = services["init"]["command"][0]
    assert "cockroach init --insecure --host=roach1:26357" in init_script
    assert init_script.index("cockroach init") < init_script.index("--file=/sql/001_bootstrap.sql")
    assert services["setup"]["depends_on"]["init"]["condition"] == "service_completed_successfully"
    for name in ("web", "worker", "beat"):
        spec = services[name]
        assert spec["depends_on"]["setup"]["condition"] == "service_completed_successfully"
        assert spec["depends_on"]["redis"]["condition"] == "service_healthy"
        url = spec["environment"]["DATABASE_URL"]
        assert _database_from_url(url)["ENGINE"] == "django_cockroachdb"
        assert spec["environment"]["UNSAY_REGIONS"].split(",") == REGIONS
    assert "celery" in services["worker"]["command"] and "worker" in services["worker"]["command"]
    assert "beat" in services["beat"]["command"]


def test_bootstrap_sql_sets_the_regions_the_app_expects_and_survives_region_failure():
    sql = (PROJECT_DIR / "sql" / "001_bootstrap.sql").read_text()
    primary = re.search(r'SET PRIMARY REGION "([\w-]+)"', sql).group(1)
    added = re.findall(r'ADD REGION IF NOT EXISTS "([\w-]+)"', sql)
    assert primary == settings.UNSAY_PRIMARY_REGION == REGIONS[0]
    assert [primary, *added] == settings.UNSAY_REGIONS == REGIONS
    assert set(REGIONS) <= KNOWN_REGIONS
    assert "SURVIVE REGION FAILURE" in sql
    assert sql.index("SET PRIMARY REGION") < sql.index("ADD REGION") < sql.index("SURVIVE REGION FAILURE")


def test_every_engine_specific_statement_list_has_its_reverse_and_migrations_read_nothing_live():
    """Engine SQL is written in the migrations (core.migration_ops.EngineSQL over FORWARD / REVERSE);
    every vendor with forward statements has reverse ones, and no migration reads files or the
    environment when it runs: a migration means the same thing whenever it runs."""
    import importlib

    paths = sorted(PROJECT_DIR.glob("*/migrations/0*.py"))
    with_sql = []
    for path in paths:
        source = path.read_text()
        assert "os.environ" not in source and "read_text" not in source and "sqlfiles" not in source, path
        if "EngineSQL(" not in source:
            continue
        module = importlib.import_module(f"{path.parent.parent.name}.migrations.{path.stem}")
        assert set(module.FORWARD) == set(module.REVERSE) and all(module.REVERSE.values()), path
        with_sql.append(path.stem)
    assert len(with_sql) >= 4, with_sql


def test_cockroachdb_url_selects_django_cockroachdb_with_telemetry_off():
    db = _database_from_url("cockroachdb://app:s3cret@roach4:26257/unsay?sslmode=verify-full&sslrootcert=/ca.crt")
    assert db["ENGINE"] == "django_cockroachdb"
    assert (db["HOST"], db["PORT"], db["NAME"], db["USER"], db["PASSWORD"]) == ("roach4", "26257", "unsay", "app",
                                                                                  "s3cret")
    assert db["OPTIONS"] == {"sslmode": "verify-full", "sslrootcert": "/ca.crt"}  # no pgvector-only options
    assert settings.DISABLE_COCKROACHDB_TELEMETRY is True


# --- Against a real cluster ----------------------------------------------------------------------


@pytest.fixture
def cockroach_database():
    """A fresh database on the cluster at UNSAY_COCKROACH_URL, made multi-region when the cluster is; dropped after."""
    import psycopg

    base = urlparse(os.environ["UNSAY_COCKROACH_URL"])
    name = f"unsay_test_{uuid.uuid4().hex[:8]}"
    admin_url = urlunparse(base._replace(scheme="postgresql"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
        cluster_regions = [row[0] for row in conn.execute("SELECT region FROM [SHOW REGIONS FROM CLUSTER]")]
        multi_region = set(REGIONS) <= set(cluster_regions)
        if multi_region:
            conn.execute(f'ALTER DATABASE {name} SET PRIMARY REGION "{REGIONS[0]}"')
            for region in REGIONS[1:]:
                conn.execute(f'ALTER DATABASE {name} ADD REGION "{region}"')
            conn.execute(f"ALTER DATABASE {name} SURVIVE REGION FAILURE")
    env = os.environ.copy()
    env.update(UNSAY_PROFILE="test", DJANGO_SETTINGS_MODULE="unsay_site.settings",
               DATABASE_URL=urlunparse(base._replace(path="/" + name)))
    if not multi_region:
        env["UNSAY_REGIONS"] = env["UNSAY_PRIMARY_REGION"] = REGIONS[0]
    yield {"env": env, "multi_region": multi_region, "name": name}
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} CASCADE")


def run(argv, env, timeout=900):
    result = subprocess.run(argv, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


@pytest.mark.cockroach
def test_migrate_then_status_on_cockroachdb(cockroach_database):
    env = cockroach_database["env"]
    run([sys.executable, "manage.py", "migrate", "--no-input"], env)
    report = json.loads(run([sys.executable, "manage.py", "status", "--json"], env))
    assert report["ok"] is True and report["engine"] == "cockroachdb"
    assert "CockroachDB" in report["server_version"]
    assert report["counts"]["facts"] == 0
    if cockroach_database["multi_region"]:
        assert report["topology"] == "multi-region"
        assert sorted(report["regions"]) == sorted(REGIONS) and report["primary_region"] == REGIONS[0]
        assert report["survival_goal"] == "region"
    else:
        assert report["topology"] == "single-region"


RETRY_SCRIPT = """
import json, django
django.setup()
import psycopg
from django.db import connection
from core.retry import RetriesExhausted, run_in_transaction

with connection.cursor() as c:
    c.execute("CREATE TABLE IF NOT EXISTS retry_probe (id INT PRIMARY KEY, n INT NOT NULL)")
    c.execute("UPSERT INTO retry_probe VALUES (1, 0)")
s = connection.settings_dict
rival = psycopg.connect(host=s["HOST"], port=s["PORT"], user=s["USER"], password=s["PASSWORD"] or None,
                        dbname=s["NAME"], autocommit=True, **s["OPTIONS"])
attempts = []

def increment():
    attempts.append(1)
    with connection.cursor() as c:
        c.execute("SELECT n FROM retry_probe WHERE id = 1")
        n = c.fetchone()[0]
        if len(attempts) == 1:  # a rival commits a write to the row we read, once
            rival.execute("UPDATE retry_probe SET n = n + 100 WHERE id = 1")
        c.execute("UPDATE retry_probe SET n = %s WHERE id = 1", [n + 1])
    return n + 1

result = run_in_transaction(increment, attempts=5, base_delay=0.01)
conflict = {"attempts": len(attempts), "result": result}

# CockroachDB can inject 40001 into every statement of an explicit transaction: whole-transaction
# retries never get past it, so the helper must give up after its bound.
with connection.cursor() as c:
    c.execute("SET inject_retry_errors_enabled = true")
calls = []
def select_one():
    calls.append(1)
    with connection.cursor() as c:
        c.execute("SELECT 1")
try:
    run_in_transaction(select_one, attempts=3, base_delay=0.001)
    gave_up = None
except RetriesExhausted as exc:
    gave_up = str(exc)
print(json.dumps({"conflict": conflict, "injected_calls": len(calls), "gave_up": gave_up}))
"""


@pytest.mark.cockroach
def test_retry_helper_on_cockroachdb(cockroach_database):
    env = cockroach_database["env"]
    out = run([sys.executable, "-c", RETRY_SCRIPT], env, timeout=120)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["conflict"]["attempts"] >= 2 and report["conflict"]["result"] == 101
    assert report["injected_calls"] == 3
    assert "after 3 attempts (SQLSTATE 40001)" in report["gave_up"]
