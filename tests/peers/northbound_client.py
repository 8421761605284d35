#!/usr/bin/env python3
"""A Python MCP SDK client of Spear's northbound endpoint, for
tests/tests/northbound_local.rs. Usage: northbound_client.py URL CALLS_JSON.

Runs under the SDK 1.x venv (protocol 2025-11-25, a session) and the 2.x
venv (2026-07-28, stateless, found by `server/discover`). Lists the tools,
makes each call of CALLS_JSON ([{"tool": NAME, "args": {...}}]), and prints
one JSON object: the protocol version, the tool names and, per call, its
text, whether it was a tool error, and the protocol error if any."""
import asyncio
import json
import sys

import mcp

url, calls = sys.argv[1], json.loads(sys.argv[2])


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def exercise(list_tools, call_tool, version):
    listed = await list_tools()
    out = {"protocol": version, "tools": sorted(t.name for t in listed.tools), "calls": []}
    for call in calls:
        try:
            result = await call_tool(call["tool"], call.get("args", {}))
            out["calls"].append({"tool": call["tool"], "text": text_of(result),
                                 "is_error": bool(result.isError if hasattr(result, "isError") else result.is_error),
                                 "error": None})
        except Exception as error:  # the JSON-RPC error, as the SDK raises it
            out["calls"].append({"tool": call["tool"], "text": "", "is_error": True, "error": str(error)})
    return out


async def with_sdk1():
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            return await exercise(session.list_tools, session.call_tool, init.protocolVersion)


async def with_sdk2():
    from mcp import Client

    async with Client(url) as client:
        return await exercise(client.list_tools, client.call_tool, client.protocol_version)


def main():
    try:
        from mcp import Client  # noqa: F401  (2.x only)
        run = with_sdk2
    except ImportError:
        run = with_sdk1
    print(json.dumps(asyncio.run(run())))


main()
