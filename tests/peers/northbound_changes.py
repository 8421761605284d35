#!/usr/bin/env python3
"""A Python MCP SDK 1.x client (protocol 2025-11-25, a session) that waits
to be told its tool list changed, for tests/tests/conformance_server.rs.
Usage: northbound_changes.py URL TRIGGER_TOOL.

Lists the tools, calls TRIGGER_TOOL (which changes the upstream server's
tools), waits at most 30 s for `notifications/tools/list_changed`, lists
again, and prints one JSON object: the tools before and after, whether it
was told, and after how many seconds."""
import asyncio
import json
import sys
import time

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

url, trigger = sys.argv[1], sys.argv[2]


async def main():
    told = asyncio.Event()

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            told.set()

    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            before = sorted(t.name for t in (await session.list_tools()).tools)
            started = time.monotonic()
            await session.call_tool(trigger, {})
            try:
                await asyncio.wait_for(told.wait(), 30)
            except asyncio.TimeoutError:
                pass
            seconds = time.monotonic() - started
            after = sorted(t.name for t in (await session.list_tools()).tools)
    return {"before": before, "after": after, "told": told.is_set(), "seconds": seconds}


print(json.dumps(asyncio.run(main())))
