"""AWS clients: one per (service, region) per process, made here and nowhere else.

boto3 clients are thread-safe once made, but making one (~50 ms) from the shared default session is
not, hence the lock. The region is settings.UNSAY_AWS_REGION unless a caller names another. Endpoints
follow the SDK's own overrides (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>, e.g. a local S3 or
LocalStack), which botocore reads itself; credentials likewise come from its usual chain.

Tests put a botocore Stubber on the shared client (`Stubber(aws.client("s3"))`) or swap in their
own with use_client(); forget() drops every cached client. A class whose instances call a service
names it once, `client = aws.ClientOf("bedrock-runtime")`: an instance made with its own client (a test's
stub) uses that one, every other the process's.
"""

import threading

from django.conf import settings

# Model calls sit on a pharmacist's or patient's request: fail within seconds and let the caller fall
# back (the rules verdict for questions) rather than hang a worker. Other services keep botocore's defaults.
_TIMEOUTS = {
    "bedrock-runtime": {"connect_timeout": 5, "read_timeout": 30, "retries": {"max_attempts": 2, "mode": "standard"}},
}

_clients = {}
_lock = threading.Lock()


def _key(service, region):
    return service, region or settings.UNSAY_AWS_REGION


def client(service: str, region: str | None = None):
    """The process's boto3 client for the service in the region (default settings.UNSAY_AWS_REGION)."""
    key = _key(service, region)
    found = _clients.get(key)
    if found is not None:
        return found
    with _lock:
        if key not in _clients:
            # A heavy dependency loaded on first use: boto3 takes about 0.3 s to import and only deployments
            # that call AWS (Bedrock, S3, KMS) create a client; every other process starts without it.
            import boto3  # noqa: PLC0415
            from botocore.config import Config  # noqa: PLC0415

            options = _TIMEOUTS.get(service)
            _clients[key] = boto3.client(service, region_name=key[1], config=Config(**options) if options else None)
        return _clients[key]


def use_client(service: str, replacement, region: str | None = None):
    """Make `replacement` the client for the service (a stubbed or fake one); None goes back to a real one."""
    with _lock:
        if replacement is None:
            _clients.pop(_key(service, region), None)
        else:
            _clients[_key(service, region)] = replacement


def forget():
    """Drop every cached client (after the region or credentials change, and between tests)."""
    with _lock:
        _clients.clear()


class ClientOf:
    """The `client` attribute of a class calling one service: the instance's own `_client` when it was given
    one, else the process's client for the service (made on first use, not when the instance is made)."""

    def __init__(self, service: str):
        self.service = service

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return instance.__dict__.get("_client") or client(self.service)
