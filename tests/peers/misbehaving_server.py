#!/usr/bin/env python3
"""A small MCP server (stdio, JSON-RPC lines, standard library only) that
misbehaves on purpose, so tests can see how a node copes.

Tools:
  ok            answers "ok"
  crash         exits the process in the middle of the call
  hang          never answers (records any notifications/cancelled it gets)
  huge          answers with N bytes of text (arguments: {"bytes": N})
  bad_schema    has an input schema that is not an object schema
  spawn         starts a grandchild that sleeps, prints its pid, answers
  env           answers with its environment as JSON
  stderr        writes N lines to stderr, each with $TOKEN in it ({"lines": N})
  grow          adds a tool named "grown" and sends notifications/tools/list_changed

$SLOW_START (seconds) delays the server before it reads anything.
$EXTRA_TOOLS=N adds N plain tools named tool_0 .. tool_N-1 (they answer "ok").

The file named by $MISBEHAVING_LOG, if set, receives one line per
notification the server gets (to prove cancellations arrive).
"""
import json
import os
import subprocess
import sys
import time

TOOLS = [
    {"name": "ok", "description": "answers ok", "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "dies mid-call", "inputSchema": {"type": "object"}},
    {"name": "hang", "description": "never answers", "inputSchema": {"type": "object"}},
    {"name": "huge", "description": "answers with a lot of text",
     "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}}},
    {"name": "bad_schema", "description": "unusable schema", "inputSchema": {"type": "array"}},
    {"name": "spawn", "description": "starts a grandchild", "inputSchema": {"type": "object"}},
    {"name": "env", "description": "shows its environment", "inputSchema": {"type": "object"}},
    {"name": "grow", "description": "adds a tool", "inputSchema": {"type": "object"}},
    {"name": "stderr", "description": "floods stderr",
     "inputSchema": {"type": "object", "properties": {"lines": {"type": "integer"}}}},
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(request_id, body, is_error=False):
    send({"jsonrpc": "2.0", "id": request_id,
          "result": {"content": [{"type": "text", "text": body}], "isError": is_error}})


def main():
    time.sleep(float(os.environ.get("SLOW_START", "0")))
    for i in range(int(os.environ.get("EXTRA_TOOLS", "0"))):
        TOOLS.append({"name": "tool_%d" % i, "description": "plain tool %d" % i,
                      "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}})
    log = os.environ.get("MISBEHAVING_LOG")
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        request_id = message.get("id")
        if request_id is None:
            if log:
                with open(log, "a") as f:
                    f.write(json.dumps(message) + "\n")
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": message["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "misbehaving", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = message["params"]["name"]
            args = message["params"].get("arguments") or {}
            if name == "ok" or name.startswith("tool_"):
                text(request_id, "ok")
            elif name == "crash":
                os._exit(3)
            elif name == "hang":
                pass
            elif name == "huge":
                text(request_id, "x" * int(args.get("bytes", 1_000_000)))
            elif name == "spawn":
                child = subprocess.Popen(["sleep", "300"])
                text(request_id, str(child.pid))
            elif name == "grow":
                if not any(t["name"] == "grown" for t in TOOLS):
                    TOOLS.append({"name": "grown", "description": "new", "inputSchema": {"type": "object"}})
                text(request_id, "grown")
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            elif name == "grown":
                text(request_id, "I am new")
            elif name == "stderr":
                token = os.environ.get("TOKEN", "")
                for i in range(int(args.get("lines", 10))):
                    sys.stderr.write("line %d token=%s\n" % (i, token))
                sys.stderr.flush()
                text(request_id, "wrote")
            elif name == "env":
                text(request_id, json.dumps(dict(os.environ)))
            else:
                send({"jsonrpc": "2.0", "id": request_id,
                      "error": {"code": -32602, "message": "unknown tool " + name}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    main()
