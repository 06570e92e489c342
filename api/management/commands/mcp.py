"""`manage.py mcp`: the MCP server over stdio. Its identity is UNSAY_MCP_API_KEY (an API key issued
in the admin), exactly as a bearer token would be over HTTP. stdout is the protocol channel, so
this command prints nothing there; logs go to stderr."""

import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from ask.keys import verify_key


class Command(BaseCommand):
    help = "Serve the MCP tools (ask, check, get_decision, replay) over stdio; the key is UNSAY_MCP_API_KEY."

    def handle(self, *args, **options):
        if not settings.UNSAY_MCP_API_KEY:
            raise CommandError("Set UNSAY_MCP_API_KEY to an API key (issue one in the admin under API keys).")
        if verify_key(settings.UNSAY_MCP_API_KEY) is None:
            raise CommandError("UNSAY_MCP_API_KEY is not an active API key (unknown or revoked).")
        # A management command's lazy import of a slow module: the MCP SDK takes most of a second to load,
        # so a missing or revoked key is refused before it loads.
        from api.mcp_server import server  # noqa: PLC0415

        connection.close()  # tools open their own per-thread connections
        print("unsay MCP server on stdio", file=sys.stderr)
        server.run("stdio")
