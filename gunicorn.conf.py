"""gunicorn reads ./gunicorn.conf.py by default (the image's CMD runs in /app, this file's folder); `make
demo` passes it explicitly, so the demo's web server runs with production's worker model.

Worker model: 2 processes x 16 threads (gthread): a request waiting on the database or Redis holds a
thread, not a process, and a slow one is cut at 120 s. The Dockerfile's CMD repeats these as flags;
tests/site/test_serving.py keeps the two equal.

The access log keeps method, path, protocol, status, size and time, and nothing else: gunicorn's default
format has the full request line (an admin search's ?q=<patient name>), the client address, the
referrer (another page's query string) and the user agent (unsay_site/logs.py says why none of these
is logged; tests/site/test_serving.py reads the access log of a real gunicorn).
"""

workers = 2
threads = 16
timeout = 120
# On SIGTERM requests in flight get this long to finish (demo/setup.py waits a little more, then kills).
graceful_timeout = 30
# gunicorn's control socket ($HOME/.gunicorn/gunicorn.ctl) is one path per user: a second gunicorn on the
# machine (the demo beside a test or a benchmark) takes it over and unlinks it on exit. Nothing uses it.
control_socket_disable = True

access_log_format = '"%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms'
