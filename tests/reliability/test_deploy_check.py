"""`UNSAY_PROFILE=production manage.py check --deploy` passes with no warnings for the production
environment docs/operator.md documents, and names what is missing when the audit key is not set."""

import subprocess
import sys

from tests.procs import PROJECT_DIR, subprocess_env


def test_check_deploy_has_no_warnings_for_the_documented_production_environment():
    env = subprocess_env(UNSAY_PROFILE="production", SECRET_KEY="x" * 20 + "-a-long-random-production-key-0123456789",
                         UNSAY_AUDIT_KEY="prod-1:" + "a-long-random-audit-key-0123456789abcdef",
                         UNSAY_ALLOWED_HOSTS="unsay.example.org", UNSAY_BEHIND_TLS_PROXY="1",
                         UNSAY_HSTS_SECONDS="31536000", UNSAY_HSTS_INCLUDE_SUBDOMAINS="1", UNSAY_HSTS_PRELOAD="1")
    command = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    result = subprocess.run(command, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "no issues" in result.stdout
    del env["UNSAY_AUDIT_KEY"]
    missing = subprocess.run(command, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert missing.returncode != 0 and "unsay.E020" in missing.stdout + missing.stderr
