#!/usr/bin/env python3
"""A Streamable HTTP MCP server written with the official Python SDK (PyPI
`mcp`), for interoperability tests. Usage: python_http_server.py PORT [PATH]
(PATH defaults to /mcp)."""
import sys

from mcp.server.fastmcp import Context, FastMCP

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


server.run(transport="streamable-http")
