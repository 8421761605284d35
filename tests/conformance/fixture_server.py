"""Spear's fixture for the conformance suite's server scenarios: a stdio
MCP server (Python SDK 1.x, protocol 2025-11-25) with the tools, resources
and prompts the scenarios call by name. It sits behind a virtual server
(tests/conformance/server.sh), so what the suite scores is Spear's relay
of each of them, not this file.

Everything a scenario asks a server to do mid-call (log, report progress,
ask the client to sample or to fill a form) is sent related to the call,
so it travels on the call's own stream."""

import asyncio
import base64
import json

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.prompts.base import Message
from mcp import types

# A 1×1 PNG and a 44-byte silent WAV: the smallest valid files of each kind.
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)).decode()
WAV = base64.b64encode(
    b"RIFF" + (36).to_bytes(4, "little") + b"WAVEfmt "
    + (16).to_bytes(4, "little") + (1).to_bytes(2, "little") + (1).to_bytes(2, "little")
    + (8000).to_bytes(4, "little") + (8000).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (8).to_bytes(2, "little") + b"data" + (0).to_bytes(4, "little")
).decode()

server = FastMCP("spear-conformance-fixture")


@server.tool(description="Returns one text item.")
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@server.tool(description="Returns one PNG image.")
def test_image_content() -> list:
    return [types.ImageContent(type="image", data=PNG, mimeType="image/png")]


@server.tool(description="Returns one WAV clip.")
def test_audio_content() -> list:
    return [types.AudioContent(type="audio", data=WAV, mimeType="audio/wav")]


def embedded(uri: str, mime: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri=uri, mimeType=mime, text=text),
    )


@server.tool(description="Returns an embedded text resource.")
def test_embedded_resource() -> list:
    return [embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]


@server.tool(description="Returns text, an image and a resource.")
def test_multiple_content_types() -> list:
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG, mimeType="image/png"),
        embedded("test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})),
    ]


@server.tool(description="Logs three messages while it runs.")
async def test_tool_with_logging(ctx: Context) -> str:
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(message)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@server.tool(description="Reports progress three times.")
async def test_tool_with_progress(ctx: Context) -> str:
    for done in (0, 50, 100):
        await ctx.report_progress(done, 100, f"{done}% done")
        await asyncio.sleep(0.05)
    return "Tool with progress executed successfully"


@server.tool(description="Always fails, as a tool error.")
def test_error_handling() -> str:
    raise ValueError("This tool intentionally returns an error for testing")


@server.tool(description="Asks the client's model to answer a prompt.")
async def test_sampling(prompt: str, ctx: Context) -> str:
    answer = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    text = getattr(answer.content, "text", "")
    return f"LLM response: {text}"


async def ask(ctx: Context, message: str, schema: dict) -> str:
    answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return f"User response: action={answer.action}, content={json.dumps(answer.content)}"


@server.tool(description="Asks the user for a name and an email address.")
async def test_elicitation(message: str, ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "Your username"},
            "email": {"type": "string", "description": "Your email address"},
        },
        "required": ["username", "email"],
    }
    return await ask(ctx, message, schema)


@server.tool(description="Asks for a form whose fields have defaults (SEP-1034).")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verified", "default": True},
        },
    }
    return await ask(ctx, "Please review and update the form fields with defaults", schema)


@server.tool(description="Asks for a form with every kind of enum field (SEP-1330).")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    options = ["option1", "option2", "option3"]
    titled = [{"const": value, "title": value.title()} for value in options]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["One", "Two", "Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {"type": "array", "items": {"anyOf": titled}},
        },
    }
    return await ask(ctx, "Please pick from each kind of enum", schema)


@server.tool(description="Logs a line while it runs (2026-07-28: only if the request asked for a log level).")
async def test_logging_tool(ctx: Context) -> str:
    await ctx.info("Logging tool ran")
    return "Logged"


@server.tool(description="Asks the user for input in the middle of the call.")
async def test_streaming_elicitation(ctx: Context) -> str:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    return await ask(ctx, "Please answer", schema)


def added_tool() -> str:
    return "This tool was added by test_trigger_tool_change."


def added_prompt() -> str:
    return "This prompt was added by test_trigger_prompt_change."


@server.tool(description="Adds a tool and says the tool list changed.")
async def test_trigger_tool_change(ctx: Context) -> str:
    server.add_tool(added_tool, name=f"test_added_tool_{len(server._tool_manager.list_tools())}",
                    description="Added at run time.")
    await ctx.session.send_tool_list_changed()
    return "Tool list changed"


@server.tool(description="Adds a prompt and says the prompt list changed.")
async def test_trigger_prompt_change(ctx: Context) -> str:
    from mcp.server.fastmcp.prompts.base import Prompt
    server.add_prompt(Prompt.from_function(added_prompt, name=f"test_added_prompt_{len(server._prompt_manager.list_prompts())}",
                                           description="Added at run time."))
    await ctx.session.send_prompt_list_changed()
    return "Prompt list changed"


@server.resource("test://static-text", name="static-text", mime_type="text/plain", description="A text resource.")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png", description="A PNG resource.")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain",
                 description="A resource clients may subscribe to.")
def watched() -> str:
    return "Watched resource content"


@server.resource("test://template/{id}/data", name="template", mime_type="application/json",
                 description="A resource template.")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.prompt(description="A prompt without arguments.")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(description="A prompt with two arguments.")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(description="A prompt that embeds a resource.")
def test_prompt_with_embedded_resource(resourceUri: str) -> list:
    return [
        Message(role="user", content=embedded(resourceUri, "text/plain", "Embedded resource content for testing.")),
        Message(role="user", content=types.TextContent(type="text", text="Please process the embedded resource above.")),
    ]


@server.prompt(description="A prompt that carries an image.")
def test_prompt_with_image() -> list:
    return [
        Message(role="user", content=types.ImageContent(type="image", data=PNG, mimeType="image/png")),
        Message(role="user", content=types.TextContent(type="text", text="Please analyze the image above.")),
    ]


@server.completion()
async def complete(ref, argument, context):
    return types.Completion(values=[], total=0, hasMore=False)


low_level = server._mcp_server


@low_level.subscribe_resource()
async def subscribe(uri) -> None:
    return None


@low_level.unsubscribe_resource()
async def unsubscribe(uri) -> None:
    return None


@low_level.set_logging_level()
async def set_level(level) -> None:
    return None


if __name__ == "__main__":
    server.run("stdio")
