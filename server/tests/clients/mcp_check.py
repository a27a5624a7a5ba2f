"""An MCP client (the official Python SDK) using runcell as its sandbox.

Usage: python mcp_check.py URL CREDENTIAL

Lists the tools, opens a session, keeps a variable across two calls, runs a
failing program and a plot, lists and closes the session. Exits non-zero,
saying what went wrong, on the first unexpected answer.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from checks import check


def texts(result):
    return "\n".join(c.text for c in result.content if c.type == "text")


async def main(url, credential):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {credential}"}, timeout=60)
    # "legacy": the plain initialize handshake, as non-Python servers speak it.
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        check(
            {"execute_code", "create_session", "list_sessions", "close_session"} <= set(tools),
            "the tools are listed",
            sorted(tools),
        )
        schema = tools["execute_code"].input_schema
        check(
            {"language", "code"} <= set(schema.get("required", [])),
            "execute_code requires language and code",
            schema,
        )

        once = await client.call_tool("execute_code", {"language": "python", "code": "print(6 * 7)"})
        check(not once.is_error and texts(once).strip() == "42", "a one-shot run prints 42", texts(once))

        created = await client.call_tool("create_session", {"language": "python"})
        check(not created.is_error, "a session is opened", texts(created))
        session_id = json.loads(texts(created))["session_id"]

        first = await client.call_tool(
            "execute_code", {"language": "python", "code": "x = 41", "session_id": session_id}
        )
        check(not first.is_error, "a variable is set", texts(first))
        second = await client.call_tool(
            "execute_code", {"language": "python", "code": "print(x + 1)", "session_id": session_id}
        )
        check(texts(second).strip() == "42", "the session kept it", texts(second))

        failed = await client.call_tool(
            "execute_code", {"language": "python", "code": "1 / 0", "session_id": session_id}
        )
        check(failed.is_error and "ZeroDivisionError" in texts(failed), "an error is a tool error", texts(failed))

        plot = await client.call_tool(
            "execute_code",
            {
                "language": "python",
                "session_id": session_id,
                "code": "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()",
            },
        )
        images = [c for c in plot.content if c.type == "image"]
        check(
            not plot.is_error and images and images[0].mime_type == "image/png",
            "a plot comes back as a PNG image",
            [c.type for c in plot.content],
        )

        listed = await client.call_tool("list_sessions", {})
        ids = [s["session_id"] for s in json.loads(texts(listed))["sessions"]]
        check(session_id in ids, "the session is listed", ids)

        closed = await client.call_tool("close_session", {"session_id": session_id})
        check(not closed.is_error, "the session is closed", texts(closed))
        gone = await client.call_tool(
            "execute_code", {"language": "python", "code": "print(x)", "session_id": session_id}
        )
        check(gone.is_error and "no sandbox session" in texts(gone), "a closed session is gone", texts(gone))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
