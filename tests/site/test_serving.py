"""The Docker image's entry point, exercised without Docker: the Dockerfile's CMD (gunicorn) serves the
app against the embedded database, in the production profile after the image's collectstatic step,
and whitenoise answers a static file (hashed name from the manifest, long cache, compressed variant).
The demo's web server is the same gunicorn with the same configuration, started as `make demo` starts it."""

import json
import re
import runpy
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from demo import setup as demo_setup
from tests.procs import PROJECT_DIR, subprocess_env
from tests.reliability.servers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def dockerfile_cmd() -> list[str]:
    text = (PROJECT_DIR / "Dockerfile").read_text()
    return json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))


def collectstatic_env_from_dockerfile() -> dict:
    text = (PROJECT_DIR / "Dockerfile").read_text()
    # The RUN step may continue over several lines: the variables are what precedes its collectstatic.
    steps = re.split(r"^RUN ", text.replace("\\\n", " "), flags=re.M)
    [step] = [step for step in steps if "manage.py collectstatic" in step]
    return dict(re.findall(r"(\w+)=(\S+)", step.split("manage.py collectstatic")[0].split("python")[0]))


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


def test_the_dockerfile_cmd_and_gunicorn_conf_agree_on_the_worker_model():
    """The demo reads the worker model from gunicorn.conf.py; the image's CMD repeats it as flags."""
    argv, config = dockerfile_cmd(), runpy.run_path(str(PROJECT_DIR / "gunicorn.conf.py"))
    flags = {flag: argv[argv.index(flag) + 1] for flag in ("--workers", "--threads", "--timeout")}
    assert flags == {"--workers": str(config["workers"]), "--threads": str(config["threads"]),
                     "--timeout": str(config["timeout"])}


def test_the_demos_web_server_is_gunicorn_as_in_production_and_stops_cleanly(tmp_path):
    """Started exactly as `manage.py demo` starts it (demo.setup.child_commands, start_child): gunicorn
    with gunicorn.conf.py's worker model, /health under a burst of concurrent probes, a static file from
    whitenoise, the access log without query strings; SIGTERM (what the demo sends) stops it with exit 0."""
    port = free_port()
    argv = demo_setup.child_commands(port)["web"]
    assert argv[1:3] == ["-m", "gunicorn"] and argv[argv.index("--bind") + 1] == f"127.0.0.1:{port}"
    out = tmp_path / "web.log"
    env = subprocess_env(UNSAY_PROFILE="demo", UNSAY_VAR_DIR=str(tmp_path), PYTHONUNBUFFERED="1")
    with out.open("w") as log:  # as demo.setup.start_child, with the output kept to read
        proc = subprocess.Popen(argv, cwd=PROJECT_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        assert demo_setup.wait_for_health(f"{base}/health", proc=proc) == {"status": "up"}
        with ThreadPoolExecutor(200) as pool:  # runserver: one thread per connection, timeouts under a burst
            answers = list(pool.map(lambda _: get(f"{base}/health")[0], range(200)))
        assert answers == [200] * 200
        status, headers, body = get(f"{base}/static/admin/css/base.css")
        assert status == 200 and headers["Content-Type"].startswith("text/css") and body
        assert get(f"{base}/admin/login/?q=Synthetic+Wilhelmina+Quist")[0] == 200
    finally:
        codes = demo_setup.stop_children({"web": proc})
    assert codes == {"web": 0}
    text = out.read_text()
    assert "Using worker: gthread" in text, text[-3000:]
    config = runpy.run_path(str(PROJECT_DIR / "gunicorn.conf.py"))
    assert text.count("Booting worker with pid") == config["workers"], text[-3000:]
    assert '"GET /admin/login/ HTTP/1.1" 200' in text and "Quist" not in text, text[-3000:]
    assert "Control socket listening" not in text  # one path per user: never shared by two gunicorns
