#!/usr/bin/env python3
"""A hostile stdio MCP server that floods (tests/tests/server_floods.rs):
plain JSON-RPC lines over stdio, standard library only.

Tools:
  flood   for $FLOOD_SECONDS (default 3) sends server-to-client requests
          (sampling/createMessage, roots/list, elicitation/create) as fast
          as the pipe takes them, then answers a JSON object: how many it
          sent, how many the node answered with a result, how many with an
          error, and the first error's message.
  ok      answers "ok".

$HOSTILE_TOOLS=N lists N more tools (tool_0 .. tool_N-1) in one tools/list
page of about 90 bytes each: 100,000 is a 9 MB line.
"""
import json
import os
import sys
import threading
import time

WRITING = threading.Lock()
ANSWERS = {"result": 0, "error": 0, "first_error": None}
ANSWERED = threading.Condition()


def send(message):
    line = json.dumps(message, separators=(",", ":")) + "\n"
    with WRITING:
        sys.stdout.write(line)
        sys.stdout.flush()


def tools():
    listed = [
        {"name": "flood", "description": "floods the client with requests",
         "inputSchema": {"type": "object"}},
        {"name": "ok", "description": "answers ok", "inputSchema": {"type": "object"}},
    ]
    for i in range(int(os.environ.get("HOSTILE_TOOLS", "0"))):
        listed.append({"name": "tool_%d" % i, "description": "plain tool number %d" % i,
                       "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}})
    return listed


REQUESTS = [
    ("sampling/createMessage", {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                                "maxTokens": 10}),
    ("roots/list", {}),
    ("elicitation/create", {"mode": "form", "message": "your name?",
                            "requestedSchema": {"type": "object",
                                                "properties": {"name": {"type": "string"}}}}),
]


def flood(call_id):
    seconds = float(os.environ.get("FLOOD_SECONDS", "3"))
    sent = 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        method, params = REQUESTS[sent % len(REQUESTS)]
        send({"jsonrpc": "2.0", "id": "flood-%d" % sent, "method": method, "params": params})
        sent += 1
    # Every request gets an answer, a result or an error: wait for them.
    with ANSWERED:
        ANSWERED.wait_for(lambda: ANSWERS["result"] + ANSWERS["error"] >= sent, timeout=30)
        report = {"sent": sent, "results": ANSWERS["result"], "errors": ANSWERS["error"],
                  "first_error": ANSWERS["first_error"]}
    text(call_id, json.dumps(report, sort_keys=True))


def text(request_id, body):
    send({"jsonrpc": "2.0", "id": request_id,
          "result": {"content": [{"type": "text", "text": body}], "isError": False}})


def answer(message):
    method = message.get("method")
    request_id = message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile-flood", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools()}})
    elif method == "tools/call":
        name = message.get("params", {}).get("name")
        if name == "flood":
            threading.Thread(target=flood, args=(request_id,), daemon=True).start()
        else:
            text(request_id, "ok")
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
    elif request_id is not None:
        send({"jsonrpc": "2.0", "id": request_id,
              "error": {"code": -32601, "message": "method not found"}})


def main():
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "method" in message:
            answer(message)
            continue
        # An answer to one of the flood's requests.
        with ANSWERED:
            if "error" in message:
                ANSWERS["error"] += 1
                if ANSWERS["first_error"] is None:
                    ANSWERS["first_error"] = message["error"].get("message")
            else:
                ANSWERS["result"] += 1
            ANSWERED.notify_all()


if __name__ == "__main__":
    main()
