"""A Streamable HTTP MCP server on the Python SDK 1.x for
tests/tests/traces.rs: its `read_text_file` tool (the name the fs-agent
recording calls) answers with a note and appends the `traceparent` it found
in the request's `_meta`, then the one in its HTTP header, to
TRACEPARENTS_FILE.

Usage: python traced_server.py PORT TRACEPARENTS_FILE
"""

import sys

from mcp.server.fastmcp import Context, FastMCP

port, traceparents_file = int(sys.argv[1]), sys.argv[2]
mcp = FastMCP("traced", host="127.0.0.1", port=port)


@mcp.tool()
def read_text_file(path: str, ctx: Context) -> str:
    """Reads a note (any path: it is a test server)."""
    meta = ctx.request_context.meta
    extra = (meta.model_extra or {}) if meta is not None else {}
    request = ctx.request_context.request
    header = request.headers.get("traceparent", "") if request is not None else ""
    with open(traceparents_file, "a") as out:
        out.write(f"{extra.get('traceparent', '')} {header}\n")
    return "a traced note"


mcp.run(transport="streamable-http")
