"""An OTLP/HTTP trace receiver on the official `opentelemetry-proto` types,
for tests/tests/traces.rs: it decodes each ExportTraceServiceRequest and
appends every span to SPANS_FILE as one JSON line (trace and span ids in
hex, parent id, name, kind, the resource's service.name, attributes).

Logs posted to /v1/logs (ExportLogsServiceRequest) go to SPANS_FILE.logs,
one JSON line per record (body, attributes, the resource's service.name).

Usage: python otlp_receiver.py PORT SPANS_FILE
"""

import gzip
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

port, spans_file = int(sys.argv[1]), sys.argv[2]


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path.endswith("/v1/logs"):
            return self.logs(body)
        request = ExportTraceServiceRequest.FromString(body)
        with open(spans_file, "a") as out:
            for resource_spans in request.resource_spans:
                resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.write(json.dumps({
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "service": resource.get("service.name"),
                            "attributes": {a.key: value(a.value) for a in span.attributes},
                            "events": len(span.events),
                        }) + "\n")
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def logs(self, body):
        request = ExportLogsServiceRequest.FromString(body)
        with open(spans_file + ".logs", "a") as out:
            for resource_logs in request.resource_logs:
                resource = {a.key: value(a.value) for a in resource_logs.resource.attributes}
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        out.write(json.dumps({
                            "service": resource.get("service.name"),
                            "body": value(record.body),
                            "severity": record.severity_text,
                            "attributes": {a.key: value(a.value) for a in record.attributes},
                        }) + "\n")
        self.reply(ExportLogsServiceResponse().SerializeToString())

    def reply(self, reply):
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", port), Receiver).serve_forever()
