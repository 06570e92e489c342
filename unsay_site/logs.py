"""Structured logs (django-structlog): one JSON object per line in production (UNSAY_LOG_FORMAT=json),
readable key=value lines elsewhere, with the request id (or Celery task id) on every line, including
lines from the standard `logging` loggers the apps already use.

No patient data: the app logs ids, never names, contacts or letter text (tests/reliability/
test_no_phi_in_logs.py, tests/demo/test_demo_logs.py). The request middleware would log the full path with
its query string, and the admin's search box puts what was searched for (possibly a name) in `?q=`:
`redact` keeps only the path, and the handler's RedactQueryStrings filter takes the query out of any
request line in a message (runserver's `django.server` lines; gunicorn's access log has its own
format without it, gunicorn.conf.py). Client IP addresses are not logged
(DJANGO_STRUCTLOG_IP_LOGGING_ENABLED = False).

No credential: API keys, the openFDA key and reply tokens (`/r/<token>`) are masked by
core.log_filters, on the handler (MaskSecrets) and in every rendered line, tracebacks included
(mask_event_dict).
"""

import logging
import re

import structlog

from core.log_filters import mask_event_dict

SHARED = [
    structlog.contextvars.merge_contextvars,  # request_id, user_id, task_id bound by django-structlog
    structlog.stdlib.add_logger_name,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def redact(logger, method_name, event_dict):
    """Drop query strings from the request line django-structlog logs ("GET /admin/...?q=<name>") and
    from the HttpRequest Django's own `django.request` warnings carry (its repr has the full path)."""
    request = event_dict.get("request")
    if request is not None and not isinstance(request, str) and hasattr(request, "path"):
        query = "?" if getattr(request, "META", {}).get("QUERY_STRING") else ""
        request = event_dict["request"] = f"{getattr(request, 'method', '')} {request.path}{query}".strip()
    if isinstance(request, str) and "?" in request:
        event_dict["request"] = request.split("?", 1)[0] + "?<query omitted>"
    event_dict.pop("user_agent", None)
    return event_dict


# A request line anywhere in a message: runserver's "GET /path?q=<name> HTTP/1.1" (django.server), a
# proxy's or a library's. The path stays, the query goes.
REQUEST_LINE_QUERY = re.compile(r"\b((?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) /[^\s?\"']*)\?[^\s\"']*")


def omit_query(text: str) -> str:
    return REQUEST_LINE_QUERY.sub(r"\1?<query omitted>", text)


class RedactQueryStrings(logging.Filter):
    """On the handler, so every record is covered, whatever logger it came from: the query string of a
    request line in the message goes (Django's development server logs "GET /admin/...?q=<name>"
    through `django.server`), and a `request` extra that is a socket (django.server's: its repr names
    the client's address) is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):  # structlog's own records carry an event dict, redacted by `redact`
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a malformed record is the formatter's to report
                return True
            redacted = omit_query(message)
            if redacted != message:
                record.msg, record.args = redacted, ()
        request = getattr(record, "request", None)
        if request is not None and not isinstance(request, str) and not hasattr(request, "path"):
            del record.request
        return True


def formatter(fmt: str) -> dict:
    """A logging.config formatter entry rendering every record (structlog's or stdlib's) as fmt."""
    renderer = (structlog.processors.JSONRenderer() if fmt == "json"
                else structlog.dev.ConsoleRenderer(colors=False))
    return {
        "()": structlog.stdlib.ProcessorFormatter,
        # redact after ExtraAdder: a stdlib record's `extra` (django.request's HttpRequest) is redacted too.
        "foreign_pre_chain": [*SHARED, structlog.stdlib.ExtraAdder(), redact],
        # mask_event_dict last before rendering: a traceback is text only once format_exc_info has run.
        "processors": [structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                       structlog.processors.format_exc_info, mask_event_dict, renderer],
    }


def configure() -> None:
    """structlog's own loggers hand their events to stdlib logging (the LOGGING formatter renders)."""
    if structlog.is_configured():
        return
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *SHARED, redact,
                    structlog.stdlib.PositionalArgumentsFormatter(), structlog.processors.StackInfoRenderer(),
                    structlog.processors.UnicodeDecoder(), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


