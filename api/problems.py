"""RFC 9457 problem details. Every refusal of the API is a Problem; the MCP server turns the same
exceptions into a neutral sentence (api/mcp_server.py)."""

import json

from django.http import HttpResponse

PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_BASE = "/api/v1/problems/"  # a relative type URI; docs/api.md lists every one


class Problem(Exception):
    """A refusal the caller can act on. `slug` names the problem type; `title` is fixed per type."""

    def __init__(self, status: int, slug: str, title: str, detail: str = "", *, headers=None, errors=None):
        super().__init__(detail or title)
        self.status, self.slug, self.title, self.detail = status, slug, title, detail
        self.headers = headers or {}
        self.errors = errors

    @property
    def type(self) -> str:
        return PROBLEM_BASE + self.slug

    def body(self, instance: str = "") -> dict:
        body = {"type": self.type, "title": self.title, "status": self.status}
        if self.detail:
            body["detail"] = self.detail
        if instance:
            body["instance"] = instance
        if self.errors is not None:
            body["errors"] = self.errors
        return body

    def response(self, instance: str = "") -> HttpResponse:
        response = HttpResponse(json.dumps(self.body(instance)), status=self.status,
                                content_type=PROBLEM_CONTENT_TYPE)
        for name, value in self.headers.items():
            response[name] = value
        return response


def unauthenticated(detail="Send an active API key: Authorization: Bearer <key>.") -> Problem:
    return Problem(401, "unauthenticated", "Missing, unknown or revoked API key", detail,
                   headers={"WWW-Authenticate": 'Bearer realm="unsay"'})


def forbidden(detail: str) -> Problem:
    return Problem(403, "forbidden", "This key may not do that", detail)


def site_not_held(site: str) -> Problem:
    return Problem(403, "site-not-held", "This key does not hold that site",
                   f"This key's client does not hold the site {site!r}: it may receive stock and move units only "
                   "at the sites an operator granted its client (admin, API clients).")


def not_found(detail: str) -> Problem:
    return Problem(404, "not-found", "No such resource for this key", detail)


def invalid(detail: str, errors=None) -> Problem:
    return Problem(422, "invalid-request", "The request is not valid", detail, errors=errors)


def malformed(detail: str) -> Problem:
    return Problem(400, "malformed-request", "The request could not be read", detail)


def too_large(limit: int) -> Problem:
    return Problem(413, "body-too-large", "The request body is too large",
                   f"Send at most {limit} bytes.")


def unsupported_media(allowed) -> Problem:
    return Problem(415, "unsupported-media-type", "Unsupported content type",
                   f"Send the body as {' or '.join(allowed)}.")


def not_acceptable(offered) -> Problem:
    return Problem(406, "not-acceptable", "No acceptable representation",
                   f"This endpoint answers {' or '.join(offered)}: ask for one of them in Accept (or _format).")


def rate_limited(retry_after: int, limit: int) -> Problem:
    return Problem(429, "rate-limited", "Too many requests for this key",
                   f"At most {limit} requests per minute per key; retry in {retry_after} s.",
                   headers={"Retry-After": str(retry_after)})


SERVER_ERROR = Problem(500, "server-error", "The request could not be completed",
                       "The failure has been logged; try again later.")
