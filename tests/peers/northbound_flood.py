#!/usr/bin/env python3
"""A hostile client of Spear's northbound endpoint, for
tests/tests/northbound_local.rs. Usage: northbound_flood.py URL N.

Over one 2025-11-25 session (Python SDK 1.x) it calls N made-up tools,
each refused; then sends N initialize requests whose Host and Origin are a
web page's (DNS rebinding), each refused; then calls a real tool. Prints
one JSON object: how many calls were refused, how many rebinding requests
got a 4xx, and the real call's text."""
import asyncio
import http.client
import json
import sys
from urllib.parse import urlparse

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

url, n = sys.argv[1], int(sys.argv[2])


def rebinding(n):
    target = urlparse(url)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "evil", "version": "1"}}})
    refused = 0
    for _ in range(n):
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
        conn.request("POST", target.path, body, {
            "Host": "evil.example.com", "Origin": "http://evil.example.com",
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        status = conn.getresponse().status
        conn.close()
        refused += 400 <= status < 500
    return refused


async def main():
    refused = 0
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for i in range(n):
                try:
                    await session.call_tool(f"made_up_{i}", {})
                except Exception:
                    refused += 1
            rebound = rebinding(n)
            listed = await session.list_tools()
            real = next(t.name for t in listed.tools if t.name == "ls")
            result = await session.call_tool(real, {"path": sys.argv[3]})
            text = "".join(getattr(c, "text", "") for c in result.content)
    return {"refused": refused, "rebound": rebound, "text": text}


print(json.dumps(asyncio.run(main())))
