"""Spear agents in Python, built as WebAssembly components with
componentize-py against the world in wit/spear-agent.wit.

An agent is a class named ``WitWorld`` in the app module, subclassing
:class:`Agent`; the node calls its ``main`` with the run's input, and what
it returns is the run's output::

    from spear_agent import Agent, Chat

    class WitWorld(Agent):
        def main(self, question: str) -> str:
            chat = Chat()
            chat.use_servers(["fs"])
            chat.write("user", question)
            return chat.send().content

Every call the node refuses raises :class:`Refused`, with the node's
sentence; one that escapes ``main`` fails the run with it (exit code 1).
docs/guest-guide.md walks through it; docs/guest-api.md is the reference.
"""

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import wit_world
from componentize_py_types import Err
from wit_world.imports import cchat
from wit_world.imports import log as _log


class Refused(Exception):
    """A call the node refused. ``kind`` is the refusal's name as the WIT
    says it (``"denied"``, ``"invalid"``, ``"budget-spent"``...) and
    ``sentence`` the node's reason, e.g. "permission denied: server 'x'
    is not in the task's mcp.allowed_server_ids"."""

    def __init__(self, kind: str, sentence: str):
        super().__init__(f"{kind}: {sentence}")
        self.kind = kind
        self.sentence = sentence


def _call(method, *args):
    try:
        return method(*args)
    except Err as error:
        refusal = error.value
        raise Refused(refusal.kind.name.lower().replace("_", "-"), refusal.sentence) from None


def log(message: str, level: str = "info") -> None:
    """A line in the node's log, under the run's task and invocation."""
    _log.write(getattr(_log.Level, level.upper()), message)


@dataclass
class Reply:
    """A send's reply (docs/guest-api.md, "The reply")."""

    content: str
    stop_reason: str
    tool_calls: List[Dict[str, Any]]
    trace: List[Dict[str, Any]]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, text: str) -> "Reply":
        raw = json.loads(text)
        return cls(
            content=raw.get("content") or "",
            stop_reason=raw.get("stop_reason", ""),
            tool_calls=raw.get("tool_calls") or [],
            trace=raw.get("trace") or [],
            raw=raw,
        )


class Chat:
    """A session with the task's model and its allowed MCP tools."""

    def __init__(self):
        self._session = _call(cchat.Session.create)
        self._tools: Dict[str, Callable[..., Any]] = {}

    def set_param(self, key: str, value: Any) -> None:
        """Sets a session or request param (a narrowing write only)."""
        _call(self._session.set_param, key, json.dumps(value))

    def get_param(self, key: str) -> Any:
        return json.loads(_call(self._session.get_param, key))

    def use_servers(self, ids: List[str]) -> None:
        self.set_param("mcp.server_ids", ids)

    def allow_tools(self, patterns: List[str]) -> None:
        self.set_param("mcp.tool_allowlist", patterns)

    def deny_tools(self, patterns: List[str]) -> None:
        self.set_param("mcp.tool_denylist", patterns)

    def write(self, role: str, text: str) -> None:
        """A ``system`` or ``user`` message."""
        _call(self._session.write_msg, role, text)

    def tool(self, description: str, parameters: Optional[Dict[str, Any]] = None, name: Optional[str] = None):
        """Offers the decorated function to the model as a guest tool; it is
        called with the model's arguments as keywords and its result (a
        string, or anything JSON) is what the model reads::

            @chat.tool("Converts a length", {"type": "object", ...})
            def convert(value, unit): ...
        """

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            spec = {
                "name": name or function.__name__,
                "description": description,
                "parameters": parameters or {"type": "object", "properties": {}},
            }
            _call(self._session.write_fn, json.dumps(spec))
            self._tools[spec["name"]] = function
            return function

        return register

    def send(self) -> Reply:
        """Runs the model until it answers, every tool call executed: MCP
        calls by the node, guest tools here (one request at a time, the
        node's policy and budgets on each)."""
        if not self._tools:
            _call(self._session.send, cchat.SendMode.AUTO_LOOP)
            return self._reply()
        limit = self.get_param("max_iterations")
        trace: List[Dict[str, Any]] = []
        for _ in range(limit):
            reply = self.send_once()
            trace.extend(reply.trace)
            if not reply.tool_calls:
                reply.trace = trace
                return reply
            for call in reply.tool_calls:
                self._answer(call, trace)
        raise Refused("failed", f"the model asked for tools {limit} times without answering (max_iterations)")

    def send_once(self) -> Reply:
        """One request with the tools offered; the calls the model asks for
        are in the reply's ``tool_calls``, unrun."""
        _call(self._session.send, cchat.SendMode.ONE_REQUEST)
        return self._reply()

    def send_without_tools(self) -> Reply:
        _call(self._session.send, cchat.SendMode.NO_TOOLS)
        return self._reply()

    def call_tool(self, call: Dict[str, Any]) -> Dict[str, Any]:
        """Runs one MCP call of the last reply: ``{"content", "is_error",
        "server", "tool"}``."""
        return json.loads(_call(self._session.call_tool, json.dumps(call)))

    def answer(self, call_id: str, content: str) -> None:
        """Answers a call of the last reply with ``content``."""
        _call(self._session.write_msg, "tool", json.dumps({"tool_call_id": call_id, "content": content}))

    def close(self) -> None:
        self._session.__exit__(None, None, None)

    def _reply(self) -> Reply:
        return Reply.of(_call(self._session.recv))

    def _answer(self, call: Dict[str, Any], trace: List[Dict[str, Any]]) -> None:
        function = self._tools.get(call["name"]) if call.get("guest") else None
        if function is None:
            result = self.call_tool(call)
            trace.append({"name": call["name"], "server": result.get("server"),
                          "tool": result.get("tool"), "guest": False,
                          "is_error": result.get("is_error", False)})
            self.answer(call["id"], result.get("content", ""))
            return
        try:
            value = function(**json.loads(call.get("arguments") or "{}"))
            content, failed = value if isinstance(value, str) else json.dumps(value), False
        except Exception as error:  # the model reads why its call failed
            content, failed = f"the tool failed: {error}", True
        trace.append({"name": call["name"], "guest": True, "is_error": failed})
        self.answer(call["id"], content)


class Agent(wit_world.WitWorld):
    """The world's entry point: subclass it as ``WitWorld`` and define
    ``main(self, input) -> str``. ``self.task_id``, ``self.invocation_id``
    and ``self.principal`` (who the run is for, a dict) are set first."""

    def main(self, input: str) -> str:
        raise NotImplementedError("define main(self, input) in your WitWorld")

    def run(self, input: str, facts) -> str:
        self.task_id = facts.task_id
        self.invocation_id = facts.invocation_id
        self.principal = json.loads(facts.principal) if facts.principal else None
        try:
            return self.main(input)
        except Refused as error:
            raise Err(str(error)) from None
