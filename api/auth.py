"""The bearer-key authentication every /api/v1 endpoint runs (api/epcis.py widens its body limits)."""

from ninja.security import HttpBearer

from api import guard, services
from ask import keys


class ApiKeyAuth(HttpBearer):
    """Bearer API key (ask.keys), then the per-key request limit, then the body limits, so a
    refused body costs nothing but the check, and an unauthenticated caller learns nothing else."""

    def __init__(self, body_types=guard.JSON_TYPES):
        super().__init__()
        self.body_types = body_types

    def __call__(self, request):
        guard.check_url(request)
        key = services.authenticate(keys.bearer_secret(request.headers.get("Authorization")))
        services.take_request(key)
        if request.method in ("POST", "PUT", "PATCH"):
            guard.check_body(request, self.body_types)
        return key

    def authenticate(self, request, token):  # required by HttpBearer; __call__ does the work
        return services.authenticate(token)
