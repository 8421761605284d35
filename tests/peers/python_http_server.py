#!/usr/bin/env python3
"""A Streamable HTTP MCP server written with the official Python SDK (PyPI
`mcp`), for interoperability tests. Usage: python_http_server.py PORT [PATH]
(PATH defaults to /mcp)."""
import sys

from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel

port = int(sys.argv[1])
path = sys.argv[2] if len(sys.argv) > 2 else "/mcp"
server = FastMCP(
    "spear-python-peer", host="127.0.0.1", port=port, log_level="WARNING", streamable_http_path=path
)


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def read_note() -> str:
    """Returns a fixed note (a reading tool, for guests that only read)."""
    return "a note from python"


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ValueError(reason)


@server.tool()
def authorization(ctx: Context) -> str:
    """Says whether the request carried the expected Authorization header."""
    request = ctx.request_context.request
    header = request.headers.get("authorization", "") if request is not None else ""
    return "authorized" if header == "Bearer python-peer-token" else "unauthorized"


@server.tool()
def handshake(ctx: Context) -> str:
    """The protocol version and client name the client's initialize named."""
    params = ctx.session.client_params
    if params is None:
        return "no initialize"
    return f"{params.protocolVersion} {params.clientInfo.name}"


class Shipping(BaseModel):
    speed: str = "standard"
    insured: bool = False


@server.tool()
async def ship(parcel: str, ctx: Context) -> str:
    """Ships a parcel, asking how (elicitation/create, as in 2025-11-25)."""
    answer = await ctx.elicit("How should the parcel go?", Shipping)
    if answer.action != "accept":
        return f"{parcel}: not shipped ({answer.action})"
    return f"{parcel}: {answer.data.speed}, insured={answer.data.insured}"


@server.tool()
async def chatter(lines: int, text: str, ctx: Context) -> str:
    """Sends `lines` log notifications saying `text`."""
    for i in range(lines):
        await ctx.info(f"{text} #{i}")
    return f"sent {lines} lines"


@server.tool()
async def log_authorization(ctx: Context) -> str:
    """Logs the Authorization header it was sent (a careless server)."""
    request = ctx.request_context.request
    header = request.headers.get("authorization", "") if request is not None else ""
    await ctx.warning(f"called with authorization {header}")
    return "logged"


@server.tool()
async def ping_client(ctx: Context) -> str:
    """Pings the client in the middle of a call."""
    await ctx.session.send_ping()
    return "pong received"


server.run(transport="streamable-http")
