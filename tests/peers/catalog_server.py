"""An MCP server (Python SDK, stdio) serving one server's tools from
tool-catalog/catalog.json: the fleet of many tools that tool search is for.

    python catalog_server.py SERVER

Every tool answers "SERVER/TOOL ran with ARGS" (the arguments as JSON), so
a test can see which tool ran and what it was given.
"""

import json
import sys
from pathlib import Path

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

NAME = sys.argv[1]
CATALOG = json.loads((Path(__file__).parent / "tool-catalog" / "catalog.json").read_text())
TOOLS = CATALOG[NAME]

server = Server(NAME)


def schema(args: dict) -> dict:
    return {
        "type": "object",
        "properties": {arg: {"type": "string", "description": text} for arg, text in args.items()},
    }


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(name=name, description=description, inputSchema=schema(args))
        for name, description, args in TOOLS
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
    if name not in {tool[0] for tool in TOOLS}:
        raise ValueError(f"unknown tool {name}")
    text = f"{NAME}/{name} ran with {json.dumps(arguments, sort_keys=True)}"
    return [types.TextContent(type="text", text=text)]


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
