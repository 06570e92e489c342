"""ASGI entry point: Django, with the MCP server's streamable HTTP endpoint at /mcp beside it.

    uvicorn unsay_site.asgi:application --host 127.0.0.1 --port 8000

serves the whole app (admin, pages, /api/v1/) and /mcp from one process. The MCP app is a Starlette
app from the `mcp` SDK; it needs the ASGI lifespan (its session manager's task group), which Django's
handler does not take, so lifespan events go to it and everything else by path.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unsay_site.settings")
django_app = get_asgi_application()

from api.mcp_server import MCP_PATH, http_app  # noqa: E402  (needs the settings loaded above)

mcp_app = http_app()


async def application(scope, receive, send):
    path = scope.get("path", "")
    if scope["type"] == "lifespan" or path == MCP_PATH or path.startswith(MCP_PATH + "/"):
        await mcp_app(scope, receive, send)
    else:
        await django_app(scope, receive, send)
