#!/usr/bin/env python3
"""A Streamable HTTP MCP server written with the Python SDK 2.x (PyPI `mcp`
2.x, protocol 2026-07-28), for the protocol-generation tests
(tests/tests/mcp_versions.rs). Usage: python2_http_server.py PORT [TOOLS_TTL_MS].

Its tools exercise what the newer generation changes: the negotiated
version, elicitation through an `input_required` result, progress, and log
notifications. With a second argument, TOOLS_TTL_MS, its tool lists carry
that `ttlMs` (SEP-2549), and its `grow` tool adds a tool without telling
anyone, so a client sees it only by listing again; `grow_announced` adds
one and announces it on the client's `subscriptions/listen` stream."""
import sys
from typing import Annotated

import anyio
from pydantic import BaseModel

from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve

port = int(sys.argv[1])
hints = {"tools/list": CacheHint(ttl_ms=int(sys.argv[2]))} if len(sys.argv) > 2 else None
server = MCPServer("spear-python2-peer", log_level="WARNING", cache_hints=hints)


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def handshake(ctx: Context) -> str:
    """The protocol version this request was made under."""
    return f"{ctx.protocol_version}"


class Shipping(BaseModel):
    speed: str = "standard"
    insured: bool = False


def ask_shipping(ctx: Context) -> Elicit[Shipping]:
    return Elicit("How should the parcel go?", Shipping)


@server.tool()
def ship(
    parcel: str,
    answer: Annotated[ElicitationResult[Shipping], Resolve(ask_shipping)],
) -> str:
    """Ships a parcel, asking how (an input_required round at 2026-07-28)."""
    if answer.action != "accept":
        return f"{parcel}: not shipped ({answer.action})"
    return f"{parcel}: {answer.data.speed}, insured={answer.data.insured}"


@server.tool()
async def work(seconds: float, every: float, ctx: Context) -> str:
    """Works for `seconds`, reporting progress every `every` seconds
    (`every` 0: silently)."""
    elapsed = 0.0
    step = every if every > 0 else seconds
    while elapsed < seconds:
        await anyio.sleep(step)
        elapsed += step
        if every > 0:
            await ctx.report_progress(elapsed, seconds)
    return f"worked {seconds}s"


@server.tool()
async def chatter(lines: int, text: str, ctx: Context) -> str:
    """Sends `lines` log notifications saying `text`."""
    for i in range(lines):
        await ctx.info(f"{text} #{i}")
    return f"sent {lines} lines"


@server.tool()
def grow(name: str) -> str:
    """Adds a tool called `name` (no list_changed notification)."""
    server.add_tool(lambda: name, name=name, description=f"added at run time: {name}")
    return f"added {name}"


@server.tool()
async def grow_announced(name: str, ctx: Context) -> str:
    """Adds a tool called `name` and says so: at 2026-07-28 the tools
    list_changed notification goes to each subscriptions/listen stream
    that asked for it."""
    server.add_tool(lambda: name, name=name, description=f"added and announced: {name}")
    await ctx.notify_tools_changed()
    return f"added {name}, announced"


server.run(transport="streamable-http", host="127.0.0.1", port=port)
