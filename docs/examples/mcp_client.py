"""An MCP client session against Unsay with the official SDK (pip install mcp==2.3.0).

    UNSAY_KEY=usk_... python docs/examples/mcp_client.py http://127.0.0.1:8000/mcp            # streamable HTTP
    UNSAY_KEY=usk_... python docs/examples/mcp_client.py stdio                                # manage.py mcp

Asks, then checks the answer; pass a decision id as the last argument to check and show that one.
"""

import asyncio
import json
import os
import sys

from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def session_story(session, decision_id=None):
    tools = await session.list_tools()
    print("tools:", ", ".join(t.name for t in tools.tools))
    if decision_id is None:
        asked = await session.call_tool("ask", {"question": "Is my valsartan safe?"})
        decision = asked.structured_content
        print("ask ->", decision["verdict"], decision["id"])
        decision_id = decision["id"]
    checked = (await session.call_tool("check", {"decision_ids": [decision_id]})).structured_content["results"][0]
    print("check ->", json.dumps({k: checked[k] for k in ("standing", "state", "current_verdict")}))
    for change in checked["changes"]:
        read, now = change["read"] or {}, change["now"] or {}
        print(f"  changed: {change['kind']} {read.get('fact_key')} v{read.get('version')} -> v{now.get('version')}"
              f" ({change['reason']})")
    shown = (await session.call_tool("get_decision", {"decision_id": decision_id})).structured_content
    print("get_decision ->", shown["status"], "superseded by", (shown["superseded_by"] or {}).get("verdict"))
    for correction in shown["corrections"]:
        print(f"  correction: {correction['old_verdict']} -> {correction['new_verdict']} ({correction['status']}),"
              f" diff {correction['diff']}")
    replayed = (await session.call_tool("replay", {"decision_id": decision_id})).structured_content
    print("replay ->", len(replayed["believed"]), "versions believed at", replayed["at"])
    refused = await session.call_tool("get_decision", {"decision_id": "00000000-0000-0000-0000-000000000000"})
    print("refused ->", refused.is_error, refused.content[0].text)


async def main(target: str, decision_id: str | None):
    key = os.environ["UNSAY_KEY"]
    if target == "stdio":
        server = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp"],
                                       env={**os.environ, "UNSAY_MCP_API_KEY": key})
        async with Client(server) as client:
            await session_story(client, decision_id)
        return
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with streamable_http_client(target, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session_story(session, decision_id)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
