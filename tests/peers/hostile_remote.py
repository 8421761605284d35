#!/usr/bin/env python3
"""A hostile *remote* MCP server (tests/tests/remote_hostile.rs), standard
library only: raw control of status lines, headers and body timing.

Usage: hostile_remote.py PORT_FILE
  Binds 127.0.0.1 port 0, writes the port to PORT_FILE (a tmp file renamed
  into place, so a reader never sees a partial file) and serves until
  killed.

Paths:
  POST /mcp     Streamable HTTP (2025-11-25; 2025-06-18 and 2025-03-26 are
                echoed back when the client asks for one). initialize answers
                JSON with an Mcp-Session-Id; notifications and responses 202;
                ping {}; tools/list the tools below; tools/call:
      echo          "echo: <text>"
      flood_events  text/event-stream of endless notifications/message
                    events (no `id:` lines, never the result) until the
                    client goes away; counted in flood_events_sent
      huge_header   a 200 whose headers hold X-Huge of 1 MiB, then a result
      many_headers  a 200 with 10,000 headers X-H-0 .. X-H-9999, then a result
      slow_body     Content-Length of the real result, then one byte every 2 s
      gzip_bomb     Content-Encoding: gzip of 50 MB of b"0" (~50 KB on the wire)
  GET /mcp      405          DELETE /mcp   200
  GET /sse      legacy HTTP+SSE (2024-11-05): the endpoint event
                (/sse/messages?session=1), then endless notifications/message
                events; counted in sse_events_sent
  POST /sse/messages  202, body ignored (initialize is never answered)
  POST /oauth/mcp     401, WWW-Authenticate: Bearer resource_metadata=...
  GET /.well-known/oauth-protected-resource[/oauth/mcp]
                Protected Resource Metadata naming $HOSTILE_AS (default
                http://127.0.0.3:9/) as the authorization server
  GET /stats    {"flood_events_sent", "sse_events_sent", "canary_connections",
                 "canary_seen", "connections" (requests per path),
                 "open_streams" (streams being written now), "calls"}

$CANARY_PORT_FILE set: also a plain TCP listener on 127.0.0.3 port 0, its
port written to that file the same way, bound before anything else; every
connection it accepts is counted (canary_connections) and its first line
kept (canary_seen, the first 10). `{canary_port}` in $HOSTILE_AS is replaced
by its port, so one process can point the metadata at its own canary.
"""

import json
import os
import socket
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST = VERSIONS[0]
PLAIN_SCHEMA = {"type": "object"}
TOOLS = [
    {"name": "echo", "description": "echoes its text",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "flood_events", "description": "streams events forever", "inputSchema": PLAIN_SCHEMA},
    {"name": "huge_header", "description": "answers with a 1 MiB header", "inputSchema": PLAIN_SCHEMA},
    {"name": "many_headers", "description": "answers with 10,000 headers", "inputSchema": PLAIN_SCHEMA},
    {"name": "slow_body", "description": "answers one byte every 2 s", "inputSchema": PLAIN_SCHEMA},
    {"name": "gzip_bomb", "description": "answers 50 MB gzipped", "inputSchema": PLAIN_SCHEMA},
]

EVENT = (b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
         b'"params":{"level":"debug","data":"x"}}\n\n')
# Events written per send: small enough that a closed client stops the
# count within a batch or two, large enough to flood.
BATCH_EVENTS = 64
BATCH = EVENT * BATCH_EVENTS
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError, OSError)

STATS_LOCK = threading.Lock()
STATS = {
    "flood_events_sent": 0,
    "sse_events_sent": 0,
    "canary_connections": 0,
    "canary_seen": [],
    "connections": {},
    "open_streams": {"flood_events": 0, "sse": 0, "slow_body": 0},
    "calls": {},
}


def count(key, n=1, within=None):
    with STATS_LOCK:
        table = STATS if within is None else STATS[within]
        table[key] = table.get(key, 0) + n


def gzip_of_zeros(size):
    """gzip (wbits 31) of `size` bytes of b"0", compressed a MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"0" * (1 << 20)
    parts, left = [], size
    while left > 0:
        piece = chunk if left >= len(chunk) else chunk[:left]
        parts.append(packer.compress(piece))
        left -= len(piece)
    parts.append(packer.flush())
    return b"".join(parts)


GZIP_BOMB = gzip_of_zeros(50 * 1000 * 1000)


def write_port(path, port):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, path)


def canary(port_file):
    """The stand-in for an internal service: counts whoever reaches it."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.3", 0))
    listener.listen(64)
    port = listener.getsockname()[1]

    def serve():
        while True:
            conn, _ = listener.accept()
            count("canary_connections")
            threading.Thread(target=note, args=(conn,), daemon=True).start()

    def note(conn):
        try:
            conn.settimeout(1.0)
            first = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
        except GONE:
            first = ""
        finally:
            conn.close()
        with STATS_LOCK:
            if len(STATS["canary_seen"]) < 10:
                STATS["canary_seen"].append(first)

    threading.Thread(target=serve, daemon=True).start()
    write_port(port_file, port)
    return port


def rpc_result(request_id, result):
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result},
                      separators=(",", ":")).encode()


def rpc_error(request_id, code, message):
    return json.dumps({"jsonrpc": "2.0", "id": request_id,
                       "error": {"code": code, "message": message}},
                      separators=(",", ":")).encode()


def text_result(request_id, text):
    return rpc_result(request_id, {"content": [{"type": "text", "text": text}]})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hostile-remote/1"

    def log_message(self, *args):
        pass

    # ----- plumbing -----

    def path_only(self):
        return self.path.split("?", 1)[0]

    def body(self):
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def raw(self, data):
        """Writes bytes as they are; False once the client has gone."""
        try:
            self.wfile.write(data)
            return True
        except GONE:
            self.close_connection = True
            return False

    def answer(self, code, body=b"", content_type="application/json", headers=()):
        self.send_response(code)
        if body:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        try:
            self.end_headers()
            if body:
                self.wfile.write(body)
        except GONE:
            self.close_connection = True

    def base_url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def stream(self, kind, counter, first=b""):
        """An endless event stream, until the client goes away."""
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n")
        self.close_connection = True
        count(kind, 1, "open_streams")
        try:
            if not self.raw(head + first):
                return
            while self.raw(BATCH):
                count(counter, BATCH_EVENTS)
        finally:
            count(kind, -1, "open_streams")

    # ----- methods -----

    def do_GET(self):
        path = self.path_only()
        count("GET " + path, 1, "connections")
        if path == "/stats":
            with STATS_LOCK:
                body = json.dumps(STATS, sort_keys=True).encode()
            self.answer(200, body)
        elif path == "/mcp":
            self.answer(405, headers=[("Allow", "POST, DELETE")])
        elif path == "/sse":
            endpoint = b"event: endpoint\ndata: /sse/messages?session=1\n\n"
            self.stream("sse", "sse_events_sent", endpoint)
        elif path in ("/.well-known/oauth-protected-resource/oauth/mcp",
                      "/.well-known/oauth-protected-resource"):
            metadata = {"resource": self.base_url() + "/oauth/mcp",
                        "authorization_servers": [self.server.authorization_server]}
            self.answer(200, json.dumps(metadata).encode())
        elif path == "/oauth/mcp":
            self.challenge()
        else:
            self.answer(404)

    def do_DELETE(self):
        path = self.path_only()
        count("DELETE " + path, 1, "connections")
        self.body()
        self.answer(200 if path == "/mcp" else 404)

    def do_POST(self):
        path = self.path_only()
        count("POST " + path, 1, "connections")
        body = self.body()
        if path == "/mcp":
            self.mcp(body)
        elif path == "/sse/messages":
            self.answer(202)
        elif path == "/oauth/mcp":
            self.challenge()
        else:
            self.answer(404)

    def challenge(self):
        metadata = self.base_url() + "/.well-known/oauth-protected-resource/oauth/mcp"
        self.answer(401, b'{"error":"invalid_token"}',
                    headers=[("WWW-Authenticate", 'Bearer resource_metadata="%s"' % metadata)])

    # ----- Streamable HTTP -----

    def mcp(self, body):
        try:
            message = json.loads(body)
        except ValueError:
            self.answer(400, rpc_error(None, -32700, "parse error"))
            return
        if not isinstance(message, dict):
            self.answer(400, rpc_error(None, -32600, "one JSON-RPC message per POST"))
            return
        method, request_id = message.get("method"), message.get("id")
        if method is None or request_id is None:
            # A notification, or the client's answer to a request.
            self.answer(202)
            return
        params = message.get("params") or {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            result = {"protocolVersion": asked if asked in VERSIONS else LATEST,
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "hostile-remote", "version": "1"}}
            session = "hostile-%d-%d" % (os.getpid(), time.monotonic_ns())
            self.answer(200, rpc_result(request_id, result), headers=[("Mcp-Session-Id", session)])
        elif method == "ping":
            self.answer(200, rpc_result(request_id, {}))
        elif method == "tools/list":
            self.answer(200, rpc_result(request_id, {"tools": TOOLS}))
        elif method == "tools/call":
            self.call(request_id, params.get("name"), params.get("arguments") or {})
        else:
            self.answer(200, rpc_error(request_id, -32601, "method not found: %s" % method))

    def call(self, request_id, name, arguments):
        count(str(name), 1, "calls")
        if name == "echo":
            self.answer(200, text_result(request_id, "echo: %s" % arguments.get("text", "")))
        elif name == "flood_events":
            self.stream("flood_events", "flood_events_sent")
        elif name == "huge_header":
            self.hostile_head(request_id, [b"X-Huge: " + b"a" * (1 << 20)])
        elif name == "many_headers":
            self.hostile_head(request_id, [b"X-H-%d: v" % i for i in range(10000)])
        elif name == "slow_body":
            self.slow_body(request_id)
        elif name == "gzip_bomb":
            head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Encoding: gzip\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n" % len(GZIP_BOMB))
            self.close_connection = True
            self.raw(head + GZIP_BOMB)
        else:
            self.answer(200, rpc_error(request_id, -32602, "unknown tool: %s" % name))

    def hostile_head(self, request_id, lines):
        """A 200 whose head holds `lines`, then a normal result."""
        body = text_result(request_id, "%s: you should never see this" % "hostile head")
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n" % len(body))
        self.close_connection = True
        self.raw(head + b"\r\n".join(lines) + b"\r\n\r\n" + body)

    def slow_body(self, request_id):
        body = text_result(request_id, "slow body done")
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
        self.close_connection = True
        count("slow_body", 1, "open_streams")
        try:
            if not self.raw(head):
                return
            for i in range(len(body)):
                time.sleep(2)
                if not self.raw(body[i:i + 1]):
                    return
        finally:
            count("slow_body", -1, "open_streams")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # A server that floods must not be stopped by its own backlog.
    request_queue_size = 128
    authorization_server = "http://127.0.0.3:9/"

    def handle_error(self, request, client_address):
        # A client that hangs up mid-request is the point, not news.
        kind = sys.exc_info()[0]
        if kind is not None and issubclass(kind, GONE):
            return
        super().handle_error(request, client_address)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: hostile_remote.py PORT_FILE")
    authorization_server = os.environ.get("HOSTILE_AS", "http://127.0.0.3:9/")
    canary_file = os.environ.get("CANARY_PORT_FILE")
    if canary_file:
        port = canary(canary_file)
        authorization_server = authorization_server.replace("{canary_port}", str(port))
    server = Server(("127.0.0.1", 0), Handler)
    server.authorization_server = authorization_server
    write_port(sys.argv[1], server.server_address[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
