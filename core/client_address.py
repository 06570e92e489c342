"""Who is asking, for the public pages' per-address limits (check my pack, reply links): the request's
REMOTE_ADDR, never X-Forwarded-For (a header any client can write). Behind a proxy every client shares the
proxy's address; the limits then hold for all of them together."""


def client_address(request) -> str:
    return request.META.get("REMOTE_ADDR", "") or "unknown"
