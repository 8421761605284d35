//! The full chat API end to end (issue 10): the three example guests built
//! from sdk-guest for wasm32-wasip1 (a guest tool next to the filesystem
//! server, approvals with guest-driven tool calls, structured output) run
//! as registered tasks on a real spearlet fed by a real SMS, against
//! `replay-llm` in both wire formats, streaming and not. The model checks
//! every request as its provider would and logs it, so the test also sees
//! how each param was mapped per provider.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::peers::npm_bin;
use spear_tests::procs::Proc;
use spear_tests::tasks::{
    cluster_opts, guest, invoke_json, register, replay_model_with, repo_file, Cluster,
    ClusterOptions,
};
use spear_tests::wait::{eventually, free_port};

/// The four ways a node can talk to a provider.
const WIRES: [(&str, &str, bool); 4] = [
    ("openai", "openai", false),
    ("openai-stream", "openai", true),
    ("anthropic", "anthropic", false),
    ("anthropic-stream", "anthropic", true),
];

/// One recording served by one `replay-llm`, reached through four backends.
struct Model {
    name: &'static str,
    port: u16,
    log: PathBuf,
}

impl Model {
    fn new(name: &'static str, work: &Path) -> Model {
        Model {
            name,
            port: free_port(),
            log: work.join(format!("{name}-requests.jsonl")),
        }
    }

    /// `[llm.backends.<name>-<wire>]` for each wire.
    fn backends(&self) -> String {
        let mut toml = String::new();
        for (wire, kind, stream) in WIRES {
            let url = match kind {
                "openai" => format!("http://127.0.0.1:{}/v1", self.port),
                _ => format!("http://127.0.0.1:{}", self.port),
            };
            toml.push_str(&format!(
                "[llm.backends.{}-{wire}]\nkind = \"{kind}\"\nbase_url = \"{url}\"\nmodel = \"recorded-{kind}\"\nstream = {stream}\n\n",
                self.name
            ));
        }
        toml
    }

    fn start(&self, c: &Cluster) -> Proc {
        let recording = repo_file(&format!("examples/replay/{}.json", self.name));
        let log = self.log.display().to_string();
        let listen = format!("127.0.0.1:{}", self.port);
        let (proc, _) = replay_model_with(
            c.work.path(),
            self.name,
            &recording,
            &c.files,
            &listen,
            &["--log-requests", &log],
        );
        proc
    }

    /// Every request the model received, by dialect.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn run(c: &Cluster, task: &str, module: &str, config: &Value, input: &str) -> Value {
    let (code, out, err) = register(c, task, &guest(module), config, &[]);
    assert_eq!(code, 0, "{out}{err}");
    invoke_json(c, &[task, "--input", input])
}

fn stdout(run: &Value) -> &str {
    run["stdout"].as_str().unwrap_or_default()
}

#[test]
fn the_example_guests_run_in_both_wire_formats_streaming_and_not() {
    let work = tempfile::tempdir().unwrap();
    let models = [
        Model::new("unit-agent", work.path()),
        Model::new("approval-agent", work.path()),
        Model::new("structured-agent", work.path()),
    ];
    let node_toml: String = models.iter().map(Model::backends).collect();
    let c = cluster_opts(
        "the distance is 42 km",
        ClusterOptions {
            node_toml: &node_toml,
            ..Default::default()
        },
    );
    let procs: Vec<Proc> = models.iter().map(|m| m.start(&c)).collect();
    // A read-write filesystem server for the approval guest.
    let rw = json!({"mcpServers": {"fs-rw": {"command": npm_bin("mcp-server-filesystem"), "args": [&c.files]}}});
    std::fs::write(c.work.path().join("mcp.d/fs-rw.json"), rw.to_string()).unwrap();
    eventually("fs-rw to reach the node", Duration::from_secs(30), || {
        let registry = c.node.registry()?;
        registry
            .to_string()
            .contains("fs-rw")
            .then_some(())
            .ok_or(registry.to_string())
    });
    let approved = c.files.join("approved.txt");

    for (wire, _, _) in WIRES {
        let llm = |model: &str| json!({"backend": format!("{model}-{wire}")});

        // A guest tool next to the filesystem server: both ran in one
        // turn, and both results reached the model.
        let config = json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]},
            "llm": llm("unit-agent"), "limits": {"wall_ms": 60000}});
        let out = run(
            &c,
            &format!("unit-{wire}"),
            "unit-agent",
            &config,
            "How far, in miles?",
        );
        assert_eq!(out["ok"], true, "{wire}: {out}");
        assert!(
            stdout(&out).contains("notes.txt says: the distance is 42 km"),
            "{wire}: {out}"
        );
        assert!(
            stdout(&out).contains("converted: 42 km = 26.098 mi"),
            "{wire}: {out}"
        );
        let trace = out["trace"].as_array().unwrap();
        let tools: Vec<(&str, &str)> = trace
            .iter()
            .map(|t| {
                (
                    t["server_id"].as_str().unwrap_or(""),
                    t["tool"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            tools,
            vec![("fs", "read_text_file"), ("", "convert_units")],
            "{wire}: {out}"
        );
        // The reply names the backend and model that answered.
        let kind = if wire.starts_with("openai") {
            "openai"
        } else {
            "anthropic"
        };
        let answered = format!("answered by unit-agent-{wire}/recorded-{kind}");
        let stderr = out["stderr"].as_str().unwrap_or_default();
        assert!(stderr.contains(&answered), "{wire}: {out}");

        // Approvals: the write tool is refused without "approve" (the file
        // is never written), run with it.
        let config = json!({"mcp": {"enabled": true, "allowed_server_ids": ["fs-rw"], "default_server_ids": ["fs-rw"]},
            "llm": llm("approval-agent"), "limits": {"wall_ms": 60000}});
        let task = format!("approval-{wire}");
        let out = run(&c, &task, "approval-agent", &config, "Save a note.");
        assert_eq!(out["ok"], true, "{wire}: {out}");
        assert!(stdout(&out).contains("ran read_text_file"), "{wire}: {out}");
        assert!(
            stdout(&out).contains("refused write_file: not approved"),
            "{wire}: {out}"
        );
        assert!(
            stdout(&out).contains("write: refused: write_file changes files"),
            "{wire}: {out}"
        );
        assert!(!approved.exists(), "{wire}: the refused write happened");
        let out = invoke_json(&c, &[&task, "--input", "Save a note. I approve."]);
        assert_eq!(out["ok"], true, "{wire}: {out}");
        assert!(stdout(&out).contains("ran write_file"), "{wire}: {out}");
        assert_eq!(
            std::fs::read_to_string(&approved).unwrap(),
            "written after approval",
            "{wire}"
        );
        std::fs::remove_file(&approved).unwrap();
        let ran: Vec<&str> = out["trace"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["tool"].as_str().unwrap())
            .collect();
        assert_eq!(ran, vec!["read_text_file", "write_file"], "{wire}: {out}");

        // Structured output, read into the guest's own type.
        let config = json!({"llm": llm("structured-agent"), "limits": {"wall_ms": 60000}});
        let out = run(
            &c,
            &format!("structured-{wire}"),
            "structured-agent",
            &config,
            "",
        );
        assert_eq!(out["ok"], true, "{wire}: {out}");
        assert_eq!(
            stdout(&out).trim(),
            "city=Paris temperature_c=21.5 conditions=sunny",
            "{wire}: {out}"
        );
    }

    // Without --json the trace names the guest tool as one.
    let (code, out, err) = c
        .sms
        .client(&["invoke", "unit-openai", "--input", "How far?"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("tool call convert_units (a guest tool): ok"),
        "{err}"
    );
    assert!(err.contains("tool call fs/read_text_file: ok"), "{err}");

    // The node counts guests' own tool calls: one per unit-agent run.
    let metrics = spear_tests::http::get(&c.node.http, "/metrics").unwrap();
    let line = r#"spearlet_guest_tool_calls_total{outcome="ok"} 5"#;
    assert!(
        metrics.lines().any(|l| l == line),
        "{line} not in\n{metrics}"
    );

    // No request broke a provider's rule.
    for (model, proc) in models.iter().zip(&procs) {
        assert!(
            !proc.log().contains("refused a request"),
            "{}:\n{}",
            model.name,
            proc.log()
        );
    }
    // Each param as its provider spells it.
    let structured = models[2].requests();
    assert_eq!(structured.len(), 4, "one request per wire");
    for request in &structured {
        let body = &request["body"];
        assert_eq!(body["temperature"], json!(0.2), "{request}");
        assert_eq!(body["max_tokens"], json!(300), "{request}");
        if request["dialect"] == "openai" {
            assert_eq!(body["stop"], json!(["\n\n\n"]), "{request}");
            assert_eq!(body["response_format"]["type"], "json_schema", "{request}");
            assert_eq!(
                body["response_format"]["json_schema"]["strict"], true,
                "{request}"
            );
        } else {
            assert_eq!(body["stop_sequences"], json!(["\n\n\n"]), "{request}");
            assert_eq!(
                body["output_config"]["format"]["type"], "json_schema",
                "{request}"
            );
            assert!(body.get("response_format").is_none(), "{request}");
        }
        assert!(body.get("tools").is_none(), "MCP is off: {request}");
    }
    // The guest tool is offered next to the MCP tools, in each dialect's shape.
    for request in models[0].requests() {
        let tools = request["body"]["tools"].as_array().unwrap();
        let convert = tools
            .iter()
            .find(|t| t["name"] == "convert_units" || t["function"]["name"] == "convert_units")
            .unwrap_or_else(|| panic!("convert_units not offered: {request}"));
        let schema = if request["dialect"] == "openai" {
            &convert["function"]["parameters"]
        } else {
            &convert["input_schema"]
        };
        assert_eq!(
            schema["required"],
            json!(["value", "from", "to"]),
            "{request}"
        );
        assert!(tools.len() > 1, "the filesystem tools too: {request}");
    }
}
