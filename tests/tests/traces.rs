//! Traces (issue 13): with the standard `OTEL_*` variables pointing at a
//! real OTLP receiver (one written on the official `opentelemetry-proto`
//! types, tests/peers/otlp_receiver.py), one `sms invoke` of fs-agent is one
//! trace holding SMS's gRPC server span and its call to the node, the
//! node's `invoke_agent` span, the model request (`chat`) and the MCP tool
//! call (`tools/call`), named and attributed per the OpenTelemetry GenAI
//! and MCP semantic conventions; the MCP server (a Python SDK server)
//! received that trace's id in `_meta.traceparent` and in the request's
//! `traceparent` header.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::peers::peer_file;
use spear_tests::peers::{python_sdk, HttpPeer};
use spear_tests::tasks::{cluster, fs_task, guest, register};
use spear_tests::wait::{eventually, free_port};

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn one_invocation_is_one_trace_across_sms_node_model_and_mcp_server() {
    let work = tempfile::tempdir().unwrap();
    let spans_file = work.path().join("spans.jsonl");
    let traceparents = work.path().join("traceparents");

    let receiver_port = free_port();
    let mut receiver = Command::new(python_sdk());
    receiver
        .arg(peer_file("otlp_receiver.py"))
        .arg(receiver_port.to_string())
        .arg(&spans_file);
    let _receiver = HttpPeer::start("otlp receiver", receiver, receiver_port);
    let server_port = free_port();
    let mut server = Command::new(python_sdk());
    server
        .arg(peer_file("traced_server.py"))
        .arg(server_port.to_string())
        .arg(&traceparents);
    let server = HttpPeer::start("traced mcp server", server, server_port);

    // SMS and the node read these, as operators give them.
    std::env::set_var(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{receiver_port}"),
    );
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf");
    std::env::set_var("OTEL_BSP_SCHEDULE_DELAY", "200");
    let c = cluster("traced notes");
    // The fs-agent guest uses the server "fs": here the traced one.
    let fs = json!({"mcpServers": {"fs": {"url": server.url("/mcp")}}});
    std::fs::write(c.work.path().join("mcp.d/fs.json"), fs.to_string()).unwrap();
    eventually(
        "the node to have the traced server",
        Duration::from_secs(30),
        || {
            let registry = c.node.registry()?.to_string();
            registry
                .contains(&format!("127.0.0.1:{server_port}"))
                .then_some(())
                .ok_or(registry)
        },
    );
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = c.sms.client(&["invoke", "fs-agent"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("a traced note"), "{out}");

    // The MCP server saw a traceparent; its trace holds every span.
    let seen = eventually("the server's traceparent", Duration::from_secs(10), || {
        lines(&traceparents)
            .into_iter()
            .find(|l| !l.trim().is_empty())
            .ok_or("none".to_string())
    });
    // In `_meta`, and the same in the HTTP request's header.
    let (traceparent, header) = seen.split_once(' ').unwrap_or((&seen, ""));
    assert_eq!(traceparent, header, "{seen}");
    let traceparent = traceparent.to_string();
    let trace_id = traceparent.split('-').nth(1).unwrap().to_string();
    let wanted = [
        ("sms", "spear.v1.Tasks/InvokeTask"),
        ("sms", "invoke_agent fs-agent"),
        ("spearlet", "invoke_agent fs-agent"),
        ("spearlet", "chat recorded"),
        ("spearlet", "tools/call read_text_file"),
    ];
    let spans: Vec<Value> = eventually("every span of the trace", Duration::from_secs(30), || {
        let spans: Vec<Value> = lines(&spans_file)
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|s| s["trace_id"] == trace_id.as_str())
            .collect();
        let missing: Vec<_> = wanted
            .iter()
            .filter(|(service, name)| {
                !spans
                    .iter()
                    .any(|s| s["service"] == *service && s["name"] == *name)
            })
            .collect();
        missing
            .is_empty()
            .then_some(spans.clone())
            .ok_or(format!("missing {missing:?} in {spans:?}"))
    });
    let span = |service: &str, name: &str| {
        spans
            .iter()
            .find(|s| s["service"] == service && s["name"] == name)
            .unwrap()
            .clone()
    };
    // One tree: SMS's server span is the root, its call to the node the
    // node's run's parent, and the model request and the tool call are
    // inside that run (through the loop's own spans).
    let chain: Vec<Value> = wanted.iter().map(|(s, n)| span(s, n)).collect();
    assert_eq!(chain[0]["parent_span_id"], "", "{:?}", chain[0]);
    assert_eq!(chain[1]["parent_span_id"], chain[0]["span_id"]);
    assert_eq!(chain[2]["parent_span_id"], chain[1]["span_id"]);
    let ancestors = |start: &Value| {
        let mut found = Vec::new();
        let mut parent = start["parent_span_id"].clone();
        while let Some(up) = spans.iter().find(|s| s["span_id"] == parent) {
            found.push(up["span_id"].clone());
            parent = up["parent_span_id"].clone();
        }
        found
    };
    for inner in &chain[3..] {
        assert!(
            ancestors(inner).contains(&chain[2]["span_id"]),
            "{inner:?} is not inside the run"
        );
    }
    // The server's traceparent names the tool call's span.
    assert_eq!(chain[4]["span_id"], traceparent.split('-').nth(2).unwrap());
    // The semantic conventions' attributes.
    let chat = span("spearlet", "chat recorded");
    assert_eq!(chat["attributes"]["gen_ai.operation.name"], "chat");
    assert_eq!(chat["attributes"]["gen_ai.provider.name"], "openai");
    assert_eq!(chat["attributes"]["gen_ai.request.model"], "recorded");
    let call = span("spearlet", "tools/call read_text_file");
    assert_eq!(call["attributes"]["mcp.method.name"], "tools/call");
    assert_eq!(call["attributes"]["gen_ai.tool.name"], "read_text_file");
    assert_eq!(call["attributes"]["gen_ai.operation.name"], "execute_tool");
    let run = span("spearlet", "invoke_agent fs-agent");
    assert_eq!(run["attributes"]["gen_ai.agent.name"], "fs-agent");
    // No log events ride along (their text is redacted only in the log).
    assert!(spans.iter().all(|s| s["events"] == 0), "{spans:?}");
    // No content: no prompt, tool argument or result in any span.
    let all = serde_json::to_string(&spans).unwrap();
    assert!(!all.contains("a traced note"), "a tool result is in a span");
    assert!(!all.contains("notes.txt"), "a tool argument is in a span");

    // The run's audit records reach the same pipeline as OTLP logs, from
    // SMS, each the node's JSON line with attributes to filter on.
    let logs_file = spans_file.with_extension("jsonl.logs");
    let logs: Vec<Value> = eventually(
        "the run's audit records as logs",
        Duration::from_secs(30),
        || {
            let logs: Vec<Value> = lines(&logs_file)
                .iter()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .collect();
            logs.iter()
                .any(|l| l["attributes"]["spear.audit.kind"] == "tool_call")
                .then_some(logs.clone())
                .ok_or(format!("{logs:?}"))
        },
    );
    let call = logs
        .iter()
        .find(|l| l["attributes"]["spear.audit.kind"] == "tool_call")
        .unwrap();
    assert_eq!(call["service"], "sms", "{call}");
    assert_eq!(call["attributes"]["spear.node_id"], "node-a", "{call}");
    assert_eq!(call["attributes"]["spear.audit.outcome"], "run", "{call}");
    let record: Value = serde_json::from_str(call["body"].as_str().unwrap()).unwrap();
    assert_eq!(record["tool"], "read_text_file", "{record}");
    assert_eq!(record["hash"].as_str().unwrap().len(), 64, "{record}");
    let all = serde_json::to_string(&logs).unwrap();
    assert!(
        !all.contains("notes.txt") && !all.contains("a traced note"),
        "{all}"
    );
}
