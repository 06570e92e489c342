"""Per-request limits, checked before a body reaches a schema or the database: a bounded size, a
declared JSON content type, bounded nesting and no NUL characters (PostgreSQL text cannot hold
one, so it must be refused here, not found by a failing INSERT)."""

import json

from django.conf import settings

from api import problems

JSON_TYPES = ("application/json",)


def _media_type(request) -> str:
    return (request.content_type or "").split(";")[0].strip().lower()


def _depth_and_nul(value, depth: int, limit: int) -> str:
    """'' if fine, else why not. Iterative so a hostile document cannot exhaust the stack."""
    stack = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if level > limit:
            return f"JSON nested deeper than {limit} levels."
        if isinstance(item, str):
            if "\x00" in item:
                return "NUL characters are not allowed."
        elif isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in key:
                    return "NUL characters are not allowed."
                stack.append((child, level + 1))
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
    return ""


def check_url(request) -> None:
    if "\x00" in request.path or any("\x00" in k or "\x00" in v for k, vs in request.GET.lists() for v in vs):
        raise problems.malformed("NUL characters are not allowed in the URL.")


def check_body(request, allowed_types=JSON_TYPES) -> None:
    """For requests with a body: size, content type, parseable JSON object, depth, NUL."""
    limit = settings.UNSAY_API_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise problems.malformed("Content-Length is not a number.") from None
    if declared > limit:
        raise problems.too_large(limit)
    if _media_type(request) not in allowed_types:
        raise problems.unsupported_media(allowed_types)
    raw = request.body
    if len(raw) > limit:
        raise problems.too_large(limit)
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        raise problems.malformed("The body is not valid UTF-8 JSON.") from None
    if not isinstance(document, dict):
        raise problems.malformed("The body must be a JSON object.")
    why = _depth_and_nul(document, 1, settings.UNSAY_API_MAX_JSON_DEPTH)
    if why:
        raise problems.malformed(why)
