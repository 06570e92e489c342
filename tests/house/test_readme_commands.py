"""Every `manage.py` command line the README prints runs as written, on a scratch database.

The lines are extracted from the README's ```sh blocks (so a new one is covered without editing this
file), preceded by the README's own `manage.py demo --setup-only` (the state the examples assume:
migrated, demo logins, demo data). They run with no UNSAY_PROFILE (the local default profile: no
SECRET_KEY needed), no REDIS_URL (Celery eager) and the environment naming only the scratch database,
the var directory and the fast hashing embedder (MiniLM would make this test minutes long; the
commands and their arguments are exactly the README's). Lines that cannot run here are listed in
SKIPPED with the reason, and the test fails if the README gains a command line it does not classify."""

import os
import re
import shlex
import subprocess
import sys
import time

import pytest

from tests.procs import PROJECT_DIR, command_line_env, scratch_database_name

README = PROJECT_DIR / "README.md"
SKIPPED = {
    "make demo": "long-running: serves until Ctrl-C (tests/core/test_foundation_procs.py runs the demo)",
    "make test": "the whole suite: this test is part of it",
    "manage.py ingest_recalls --since": "needs the network (api.fda.gov); the client is tested against a local "
                                        "fake in tests/recalls/test_recalls_openfda.py",
    "manage.py ingest_recalls --labels --since": "needs the network (api.fda.gov)",
    "manage.py check --deploy": "the production block (SECRET_KEY=... is a placeholder): .ci/run and "
                                "tests/reliability/test_deploy_check.py run it with a real production environment",
    "gunicorn": "long-running server: tests/site/test_serving.py serves the app with gunicorn",
    "docker compose": "no Docker daemon here",
    "DATABASE_URL": "needs your own PostgreSQL or CockroachDB server",
}


def readme_command_lines() -> list[tuple[str, str | None]]:
    """(line, skip reason or None) for every command line of every ```sh block, in README order.
    A block that exports DATABASE_URL (for that server) or drives docker compose skips all its lines."""
    lines, block, in_sh = [], [], False
    for raw in README.read_text().splitlines():
        if raw.startswith("```"):
            if in_sh:
                whole = ("DATABASE_URL" if any("DATABASE_URL=" in line for line in block)
                         else "docker compose" if any("docker compose" in line for line in block) else None)
                lines.extend((line, SKIPPED[whole] if whole else None) for line in block)
                block = []
            in_sh = raw.strip() == "```sh" and not in_sh
            continue
        if in_sh and raw.strip() and not raw.lstrip().startswith("#"):
            block.append(re.sub(r"\s+#\s.*$", "", raw).strip())
    out = []
    for line, reason in lines:
        if line.startswith("export "):
            continue
        if reason is None:
            reason = next((why for key, why in SKIPPED.items() if key in line and key != "DATABASE_URL"), None)
        out.append((line, reason))
    return out


def test_every_readme_command_line_is_either_run_or_skipped_with_a_reason():
    lines = readme_command_lines()
    run = [line for line, reason in lines if reason is None]
    assert run, "no runnable command found in the README"
    for line in run:
        assert line.startswith(".venv/bin/python manage.py "), f"unclassified README command: {line!r}"


@pytest.fixture
def scratch_database():
    with scratch_database_name("readme") as name:
        yield name


@pytest.mark.slow
@pytest.mark.django_db
def test_readme_command_lines_run_as_written_on_a_scratch_database(scratch_database, tmp_path):
    env = command_line_env(scratch_database, tmp_path, demo_password="readme-demo-password-123")
    python = str(PROJECT_DIR / ".venv" / "bin" / "python")
    commands = [".venv/bin/python manage.py demo --setup-only"]
    commands += [line for line, reason in readme_command_lines() if reason is None]
    for line in commands:
        argv = shlex.split(line)
        argv[0] = python if os.path.exists(python) else sys.executable
        started = time.monotonic()
        result = subprocess.run(argv, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=900)
        print(f"readme: {time.monotonic() - started:6.1f}s  {line}")
        assert result.returncode == 0, f"{line!r} failed:\n{result.stdout[-1500:]}\n{result.stderr[-3000:]}"
        assert "Traceback" not in result.stderr, f"{line!r}:\n{result.stderr[-3000:]}"
