"""`manage.py demo` (what `make demo` runs): everything on the embedded engines, in the foreground.

Takes a Redis of its own (REDIS_URL, else an empty database of the machine's Redis, never 0 or 15, else
an embedded redis-server), migrates, creates the demo logins, loads the demo data, then runs the web
server as production does (gunicorn with gunicorn.conf.py, static files by whitenoise), a Celery worker
and Celery beat as child processes until Ctrl-C (or SIGTERM), which stops them all. Safe to run again:
every step is idempotent (logins get a fresh password).
"""

import os
import signal
import subprocess
import sys
import threading
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from demo import setup as demo_setup


class Command(BaseCommand):
    help = "Run the demo: Redis, migrate, demo logins, demo data, then web + Celery worker + beat until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=None, help="web port (default UNSAY_PORT or 8000)")
        parser.add_argument("--setup-only", action="store_true",
                            help="migrate, create logins and load data, then exit without starting processes")
        parser.add_argument("--skip-load", action="store_true", help="do not run load_demo")

    def handle(self, *args, port=None, setup_only=False, skip_load=False, **options):
        if settings.PROFILE == "production":
            raise CommandError("manage.py demo resets the demo logins; run it with UNSAY_PROFILE=demo (make demo).")
        started = time.monotonic()
        port = port or settings.UNSAY_PORT
        if not setup_only and demo_setup.port_listening("127.0.0.1", port):
            raise CommandError(f"Something already listens on 127.0.0.1:{port}; stop it or set UNSAY_PORT.")
        redis_proc = None
        env = os.environ.copy()
        env["UNSAY_PROFILE"] = settings.PROFILE
        env["UNSAY_PORT"] = str(port)  # the children's letters and reply links point at this server
        self.site_url = demo_setup.site_url(env, port)
        if not setup_only:
            redis_url, redis_proc, how = demo_setup.find_or_start_redis(settings.VAR_DIR)
            # A database chosen on the machine's Redis names itself; REDIS_URL and the embedded one say where.
            named = how.startswith("127.0.0.1:6379 db")
            self.stdout.write(f"Redis: {how}" if named else f"Redis: {how} at {redis_url}")
            env["REDIS_URL"] = redis_url
            env["UNSAY_CELERY_EAGER"] = "0"
        try:
            self._prepare(env, setup_only=setup_only, skip_load=skip_load)
            if setup_only:
                return
            self._serve(env, port, started, redis_proc)
        finally:
            if redis_proc is not None:
                demo_setup.stop_children({"redis": redis_proc})

    load_failure = None

    def _prepare(self, env, *, setup_only, skip_load):
        self.stdout.write(f"Database: {demo_setup.database_line()}")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Migrated.")
        self.logins = demo_setup.ensure_demo_users(settings.UNSAY_DEMO_PASSWORD)
        for username, password in self.logins.items():
            self.stdout.write(f"Login: {username} / {password}")
        if skip_load:
            return
        if setup_only:
            call_command("load_demo", stdout=self.stdout, stderr=self.stderr)
            return
        # A child process, so the loaders see the Redis chosen above (settings read REDIS_URL at import).
        self.stdout.flush()
        result = subprocess.run([sys.executable, str(settings.BASE_DIR / "manage.py"), "load_demo"],
                                cwd=settings.BASE_DIR, env=env)
        if result.returncode != 0:
            # Still serve what is there: the app, the logins and the data loaded so far are worth
            # showing, and the failure is repeated in the banner so it is not missed.
            self.load_failure = f"load_demo failed with exit code {result.returncode} (see its error above)"
            self.stderr.write(self.load_failure)

    def _say(self, line):
        self.stdout.write(line)
        self.stdout.flush()

    def _serve(self, env, port, started, redis_proc):
        stop, stopping = threading.Event(), threading.Event()
        received = []
        children = {}

        def on_signal(signum, frame):
            received.append(signal.Signals(signum).name)
            if stopping.is_set():  # a second Ctrl-C while children finish: no more waiting
                os.write(1, b"Second signal: killing the children now (SIGKILL).\n")
                for proc in children.values():
                    if proc.poll() is None:
                        proc.kill()
            stop.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        self.stdout.flush()
        children.update({name: demo_setup.start_child(argv, env)
                         for name, argv in demo_setup.child_commands(port).items()})
        failed = None
        try:
            base = f"http://127.0.0.1:{port}"
            demo_setup.wait_for_health(f"{base}/health", proc=children["web"])
            # /health only says up or down; the details come from the same report staff see at /status.
            try:  # the worker takes a few seconds more; say so rather than hide it
                health = demo_setup.wait_for_report(env, timeout=30,
                                                     until=lambda report: report["celery"].get("workers"))
            except RuntimeError as exc:
                health = exc.args[1] if len(exc.args) > 1 else {}
                self.stderr.write("Celery worker not seen after 30s; the web server is up anyway.")
            self.stdout.write(self.style.SUCCESS(
                f"\nUnsay demo is up in {time.monotonic() - started:.1f}s ({health.get('engine')} "
                f"{health.get('server_version')}, Redis ok={health.get('redis', {}).get('ok')}, "
                f"workers: {', '.join(health.get('celery', {}).get('workers', [])) or 'none yet'})."))
            self.stdout.write(f"  Home       {base}/")
            self.stdout.write(f"  Admin      {base}/admin/")
            self.stdout.write(f"  Health     {base}/health (up/down; details for staff at {base}/status)")
            self.stdout.write(f"  Letters    reply links point at {self.site_url}/r/...")
            self.stdout.write(f"  Database   {demo_setup.database_line()}")
            for username, password in self.logins.items():
                self.stdout.write(f"  Login      {username} / {password}")
            if self.load_failure:
                self.stderr.write(f"  WARNING    {self.load_failure}; the demo runs without the rest of its data.")
            self.stdout.write("Ctrl-C stops the web server, the worker and beat (the worker finishes the page in "
                              f"flight first, up to {demo_setup.STOP_TIMEOUTS['worker']:.0f}s).\n")
            while not stop.wait(0.5):
                dead = {name: proc.returncode for name, proc in children.items() if proc.poll() is not None}
                if dead:
                    failed = dead
                    break
        except RuntimeError as exc:
            failed = str(exc)
        finally:
            stopping.set()
            self.stdout.write(f"Stopping ({', '.join(received) or 'a process exited'}; Ctrl-C again kills at once)...")
            self.stdout.flush()
            codes = demo_setup.stop_children(children, say=self._say)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.stdout.write(f"Stopped: {', '.join(f'{name} exit {code}' for name, code in codes.items())}.")
        if failed:
            raise CommandError(f"demo stopped because a process failed: {failed}")
