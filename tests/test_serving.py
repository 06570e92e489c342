"""The Docker image's entry point, exercised without Docker: the Dockerfile's CMD (gunicorn) serves the
app against the embedded database, in the production profile after the image's collectstatic step,
and whitenoise answers a static file (hashed name from the manifest, long cache, compressed variant)."""

import json
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.procs import PROJECT_DIR, subprocess_env
from tests.reliability.servers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def dockerfile_cmd() -> list[str]:
    text = (PROJECT_DIR / "Dockerfile").read_text()
    return json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))


def collectstatic_env_from_dockerfile() -> dict:
    text = (PROJECT_DIR / "Dockerfile").read_text()
    line = re.search(r"^RUN (.*manage\.py collectstatic.*)$", text, re.M).group(1)
    return dict(re.findall(r"(\w+)=(\S+)", line.split("python")[0]))


def get(url, **headers):
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, dict(response.headers), response.read()


def test_the_images_gunicorn_command_serves_the_app_and_its_static_files(tmp_path):
    production = dict(UNSAY_PROFILE="production", SECRET_KEY="s" * 60, UNSAY_ALLOWED_HOSTS="127.0.0.1",
                      UNSAY_SSL_REDIRECT="0", UNSAY_VAR_DIR=str(tmp_path))
    build = subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=PROJECT_DIR,
                           env=subprocess_env(**{**production, **collectstatic_env_from_dockerfile()}),
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    manifest = json.loads((tmp_path / "static" / "staticfiles.json").read_text())["paths"]
    hashed = manifest["admin/css/base.css"]

    port = free_port()
    argv = dockerfile_cmd()
    assert argv[0] == "gunicorn"
    argv[argv.index("--bind") + 1] = f"127.0.0.1:{port}"
    access_log = (tmp_path / "access.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", *argv], cwd=PROJECT_DIR, env=subprocess_env(**production),
                            stdout=access_log, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"gunicorn exited: {proc.stderr.read()[-2000:]}"
            try:
                status, _, body = get(base + "/health")
                break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not answer within 90 s"
                time.sleep(0.5)
        assert status == 200 and json.loads(body) == {"status": "up"}
        status, headers, body = get(f"{base}/static/{hashed}")
        assert status == 200 and headers["Content-Type"].startswith("text/css")
        assert "max-age=315360000" in headers.get("Cache-Control", "")  # hashed name: cached "forever"
        assert body == (tmp_path / "static" / hashed).read_bytes()
        _, gz_headers, _ = get(f"{base}/static/{hashed}", **{"Accept-Encoding": "gzip"})
        assert gz_headers.get("Content-Encoding") == "gzip"
        status, _, page = get(base + "/admin/login/?q=Synthetic+Wilhelmina+Quist", Referer=f"{base}/?q=Quist")
        assert status == 200 and hashed.encode() in page  # templates link the hashed names
    finally:
        proc.terminate()
        proc.wait(20)
        access_log.close()
    # gunicorn.conf.py: the access log has the path, never the query string, client address or referrer
    lines = (tmp_path / "access.log").read_text().splitlines()
    assert '"GET /admin/login/ HTTP/1.1" 200' in "\n".join(lines), lines
    assert not [line for line in lines if "?" in line or "Quist" in line or "127.0.0.1" in line], lines
