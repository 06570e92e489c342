"""A real gunicorn serving the app against this test session's database, for load and fault tests."""

import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager

from demo.setup import stop_children
from tests.procs import PROJECT_DIR, subprocess_env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(*, workers=2, threads=32, log_path=None, **env):
    port = free_port()
    argv = [sys.executable, "-m", "gunicorn", "unsay_site.wsgi:application", "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers), "--threads", str(threads), "--timeout", "60", "--graceful-timeout", "5",
            "--access-logfile", "-"]
    out = open(log_path, "w") if log_path else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(argv, cwd=PROJECT_DIR, env=subprocess_env(**env), stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"gunicorn exited with {proc.returncode}"
            try:
                with urllib.request.urlopen(base + "/health", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not answer /health within 60 s"
                time.sleep(0.3)
        yield base
    finally:
        stop_children({"web": proc}, timeouts={"web": 15.0})
        if log_path:
            out.close()
