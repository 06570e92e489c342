"""API v1 (HTTP, django-ninja) and the MCP server, over one service layer.

    problems.py   RFC 9457 problem details: the Problem exception and its response
    guard.py      per-request limits: body size, content type, JSON depth, NUL bytes
    auth.py       the bearer-key authentication every endpoint runs (key, request limit, body limits)
    services.py   what a key may do: ask, read a decision, check, replay, dispensing, exposure
    schemas.py    the typed request and response bodies (the OpenAPI document comes from these)
    views.py      the NinjaAPI under /api/v1/ (thin: each endpoint calls one service); mounts the routers of
                  epcis.py (POST /epcis, shelf receiving) and fhir_routes.py (FHIR out)
    mcp_server.py the MCP tools over the same services (streamable HTTP in asgi.py, stdio in `manage.py mcp`)

Identity comes only from the bearer token (ask.keys.verify_key), never from a body or argument.
"""
