"""Spear's second fixture for the conformance suite's server scenarios: a
stdio MCP server (Python SDK 2.x, protocol 2026-07-28) whose tools ask for
input the 2026-07-28 way, answering a call with `input_required` and
resuming when the client retries with its `inputResponses` and the
echoed `requestState` (SEP-2322). It sits behind virtual server `conf`
beside tests/conformance/fixture_server.py, so what the suite scores is
Spear's relay of each round, not this file.

Its request states are HMAC-sealed with a key of the process, so a state
the client changed is refused."""

import hashlib
import hmac
import json
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    ListRootsRequest,
    SamplingMessage,
    TextContent,
)

KEY = os.urandom(32)
server = MCPServer("spear-conformance-fixture-2026")


def seal(state: dict) -> str:
    body = json.dumps(state, sort_keys=True)
    tag = hmac.new(KEY, body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{tag}"


def opened(ctx: Context) -> dict | None:
    """The state the client echoed, if it is one this process sealed."""
    if ctx.request_state is None:
        return None
    body, _, tag = ctx.request_state.rpartition(".")
    want = hmac.new(KEY, body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(tag, want):
        raise ValueError("requestState integrity check failed")
    return json.loads(body)


def elicit(message: str, field: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def sample(text: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens))


def answered(ctx: Context, key: str):
    return (ctx.input_responses or {}).get(key)


@server.tool(description="Asks for the user's name with input_required.")
def test_input_required_result_elicitation(ctx: Context) -> InputRequiredResult | str:
    name = answered(ctx, "user_name")
    content = getattr(name, "content", None) or {}
    if getattr(name, "action", None) == "accept" and isinstance(content.get("name"), str):
        return f"Hello, {content['name']}!"
    return InputRequiredResult(input_requests={"user_name": elicit("What is your name?", "name")})


@server.tool(description="Asks the client's model with input_required.")
def test_input_required_result_sampling(ctx: Context) -> InputRequiredResult | str:
    answer = answered(ctx, "sample_request")
    if answer is not None:
        return f"The model said: {getattr(answer.content, 'text', '')}"
    return InputRequiredResult(input_requests={"sample_request": sample("Say hello", 100)})


@server.tool(description="Asks for the client's roots with input_required.")
def test_input_required_result_list_roots(ctx: Context) -> InputRequiredResult | str:
    answer = answered(ctx, "roots_request")
    if answer is not None:
        return f"Roots: {', '.join(str(r.uri) for r in answer.roots)}"
    return InputRequiredResult(input_requests={"roots_request": ListRootsRequest()})


@server.tool(description="Keeps its progress in the request state.")
def test_input_required_result_request_state(ctx: Context) -> InputRequiredResult | str:
    state = opened(ctx)
    if state is not None and state.get("round") == 1 and answered(ctx, "confirm") is not None:
        return "state-ok"
    return InputRequiredResult(input_requests={"confirm": elicit("Confirm?", "ok")}, request_state=seal({"round": 1}))


@server.tool(description="Asks for three inputs at once.")
def test_input_required_result_multiple_inputs(ctx: Context) -> InputRequiredResult | str:
    keys = ("user_name", "greeting", "client_roots")
    if opened(ctx) is not None and all(answered(ctx, k) is not None for k in keys):
        return "All inputs received"
    requests = {"user_name": elicit("What is your name?", "name"), "greeting": sample("Greet the user", 50),
                "client_roots": ListRootsRequest()}
    return InputRequiredResult(input_requests=requests, request_state=seal({"round": 1}))


@server.tool(description="Asks twice, one question a round.")
def test_input_required_result_multi_round(ctx: Context) -> InputRequiredResult | str:
    state = opened(ctx) or {}
    if state.get("step") == 2 and answered(ctx, "step2") is not None:
        return "Both rounds done"
    if state.get("step") == 1 and answered(ctx, "step1") is not None:
        return InputRequiredResult(input_requests={"step2": elicit("Second question?", "b")}, request_state=seal({"step": 2}))
    return InputRequiredResult(input_requests={"step1": elicit("First question?", "a")}, request_state=seal({"step": 1}))


@server.tool(description="Refuses a request state it did not seal.")
def test_input_required_result_tampered_state(ctx: Context) -> InputRequiredResult | str:
    if opened(ctx) is not None:
        return "The state is intact"
    return InputRequiredResult(input_requests={"confirm": elicit("Confirm?", "ok")}, request_state=seal({"round": 1}))


@server.tool(description="Asks only for what the client declared it can answer.")
def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult | str:
    if ctx.input_responses:
        return "Answered"
    declared = ctx.client_capabilities
    if declared is not None and declared.elicitation is not None:
        return InputRequiredResult(input_requests={"ask": elicit("A question?", "a")})
    return InputRequiredResult(input_requests={"ask": sample("A question?", 50)})


@server.tool(description="Needs a client that can sample; refuses any other with -32021.")
def test_missing_capability(ctx: Context) -> str:
    declared = ctx.client_capabilities
    if declared is None or declared.sampling is None:
        raise MCPError(-32021, "This tool needs the client's sampling capability",
                       {"requiredCapabilities": {"sampling": {}}})
    return "The client can sample"


@server.prompt(description="Asks for the user's context with input_required.")
def test_input_required_result_prompt(ctx: Context) -> InputRequiredResult | str:
    answer = answered(ctx, "user_context")
    if getattr(answer, "action", None) == "accept":
        return f"A prompt for: {json.dumps(answer.content)}"
    return InputRequiredResult(input_requests={"user_context": elicit("What is the context?", "context")})


if __name__ == "__main__":
    server.run("stdio")
