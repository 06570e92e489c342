"""Credentials never reach a log line. The one place that says what a credential looks like in a line of
text, and the two ways it is taken out: a `logging.Filter` for any handler (Django's console handler,
gunicorn's access and error logs: gunicorn.conf.py) and a structlog processor for what structlog renders
(unsay_site/logs.py: the request lines, and tracebacks, which are rendered after any filter has run).

Masked wherever it appears (the message, its arguments, a structured field, a traceback):

- an API key: the value of an `Authorization` header, anything after `Bearer `, and any Unsay key secret
  (`usk_...`, ask.keys), which would let whoever reads the log call the API as the pharmacy or patient;
- the openFDA API key, the `api_key=` query parameter of every openFDA URL: urllib3 logs its retries with
  the full URL (recalls/openfda.py masks the client's own messages; urllib3's are not the app's to word);
- a reply token, `/r/<token>`: the only credential of a patient's reply page for as long as the link lives
  (UNSAY_REPLY_LINK_DAYS), and the path of every request to it, so every request line, access log line
  and "Not Found" warning carries it.

What is masked keeps its label (`Bearer ***`, `api_key=***`, `/r/***`): the line still says what was there.
Query strings (which can hold a name searched for) are unsay_site/logs.py's to drop.
"""

import logging
import re

MASK = "***"

# (a lowercase text every match contains, the pattern, its replacement): the pattern runs only on a line
# holding that text, so a line with no credential (nearly all of them) costs a few substring searches.
_PATTERNS = [
    # An Authorization header however it is printed: a header line, a dict's repr, a WSGI environ key.
    ("authorization", re.compile(r"""(authorization["']?\s*[:=]\s*["']?)[^"'\r\n,}]+""", re.I), rf"\g<1>{MASK}"),
    ("bearer", re.compile(r"\b(bearer\s+)[^\s\"',;}]+", re.I), rf"\g<1>{MASK}"),
    ("usk_", re.compile(r"\busk_[A-Za-z0-9_-]+"), f"usk_{MASK}"),
    # openFDA's key in a URL, as sent or percent-encoded inside another URL.
    ("api_key", re.compile(r"(api_key(?:=|%3D))[^&\s\"'#]+", re.I), rf"\g<1>{MASK}"),
    # A reply link's token (base64url): any such path segment, so a forged or mistyped one is masked too.
    ("/r/", re.compile(r"(/r/)[A-Za-z0-9_-]+"), rf"\g<1>{MASK}"),
]


def mask_secrets(text: str) -> str:
    """text with every credential masked."""
    lowered = text.lower()
    for marker, pattern, replacement in _PATTERNS:
        if marker in lowered:
            text = pattern.sub(replacement, text)
    return text


def mask_value(value):
    """A structured value with every credential masked: strings, and the strings inside dicts, lists and
    tuples; any other object is masked in the repr a renderer would print, when that repr holds one."""
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, dict):
        return {key: mask_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(mask_value(item) for item in value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    shown = repr(value)
    masked = mask_secrets(shown)
    return value if masked == shown else masked


def mask_event_dict(logger, method_name, event_dict):
    """structlog processor: last before the renderer, so what format_exc_info rendered is masked too."""
    return {key: mask_value(value) for key, value in event_dict.items()}


class MaskSecrets(logging.Filter):
    """On a handler (or a logger), so every record it passes is masked: the message with its arguments,
    a structlog event dict, and a traceback as a plain `logging.Formatter` prints it (exc_text).
    Never drops a record."""

    _traceback_formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, dict):  # structlog's record: the event dict, rendered by its formatter
            record.msg = mask_value(record.msg)
        else:
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a malformed record is the formatter's to report
                return True
            masked = mask_secrets(message)
            if masked != message:
                record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            shown = self._traceback_formatter.formatException(record.exc_info)
            masked = mask_secrets(shown)
            if masked != shown:
                record.exc_text = masked
        return True
