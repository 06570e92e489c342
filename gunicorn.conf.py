"""gunicorn reads ./gunicorn.conf.py by default (the image's CMD runs in /app, this file's folder); `make
demo` passes it explicitly, so the demo's web server runs with production's worker model.

Worker model: 2 processes x 16 threads (gthread): a request waiting on the database or Redis holds a
thread, not a process, and a slow one is cut at 120 s. The Dockerfile's CMD repeats these as flags;
tests/site/test_serving.py keeps the two equal.

The access log keeps method, path, protocol, status, size and time, and nothing else: gunicorn's default
format has the full request line (an admin search's ?q=<patient name>), the client address, the
referrer (another page's query string) and the user agent (unsay_site/logs.py says why none of these
is logged; tests/site/test_serving.py reads the access log of a real gunicorn).

The path itself can be a credential: a reply link is /r/<token>, the patient's only key to their reply
page. gunicorn's access and error logs are gunicorn's own handlers (Django's LOGGING never reaches
them), so its logger puts core.log_filters.MaskSecrets on each of them, the access log's stdout
included, whatever --access-logfile or --error-logfile says (tests/demo/test_demo_logs.py reads them).
"""

from gunicorn.glogging import Logger

from core.log_filters import MaskSecrets

workers = 2
threads = 16
timeout = 120
# On SIGTERM requests in flight get this long to finish (demo/setup.py waits a little more, then kills).
graceful_timeout = 30
# gunicorn's control socket ($HOME/.gunicorn/gunicorn.ctl) is one path per user: a second gunicorn on the
# machine (the demo beside a test or a benchmark) takes it over and unlinks it on exit. Nothing uses it.
control_socket_disable = True

access_log_format = '"%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms'


class MaskedLogger(Logger):
    """gunicorn's logger with credentials masked on every handler it sets up (again on a reload)."""

    def setup(self, cfg):
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if not any(isinstance(each, MaskSecrets) for each in handler.filters):
                    handler.addFilter(MaskSecrets())


logger_class = MaskedLogger
