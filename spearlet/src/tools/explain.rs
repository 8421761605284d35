//! `spearlet explain`: why does (or doesn't) a session see a tool? Every
//! server and tool with its verdict and the layer and rule that decided it.
//! The first thing to run when a model says it has no tools.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::connections::Connections;
use crate::registry::RegistryView;
use crate::tool_policy::{
    server_verdict, set_param, tool_verdict, SessionPolicy, TaskPolicy, Verdict,
};

/// One server's verdict, with its tools' when they could be listed.
#[derive(Debug, Clone)]
pub struct ServerExplanation {
    pub server_id: String,
    pub verdict: Verdict,
    pub tools: Vec<(String, Verdict)>,
    /// What confines it, once the node has started it (stdio servers).
    pub sandbox: Option<crate::mcp::Sandboxed>,
}

/// The whole answer.
#[derive(Debug, Clone)]
pub struct Explanation {
    pub session: SessionPolicy,
    /// Session writes the policy refused, with why (what a guest would get
    /// as EACCES or EINVAL).
    pub refused_writes: Vec<RefusedWrite>,
    pub servers: Vec<ServerExplanation>,
}

/// A session write the policy refused.
#[derive(Debug, Clone)]
pub struct RefusedWrite {
    /// `key=value` as written.
    pub write: String,
    pub error: String,
}

/// Applies `writes` (key, JSON value) to a new session of `task` as a guest
/// would, then judges every server the registry, the task or the session
/// names. With `connections`, usable servers are connected to list and judge
/// their tools, and a server that fails is reported at the health layer.
pub async fn explain(
    task: &TaskPolicy,
    writes: &[(String, Value)],
    view: &RegistryView,
    connections: Option<&Connections>,
) -> Explanation {
    let mut session = SessionPolicy::from_task(task);
    let mut refused_writes = Vec::new();
    for (key, value) in writes {
        if let Err(error) = set_param(task, &mut session, key, value) {
            refused_writes.push(RefusedWrite {
                write: format!("{key}={value}"),
                error: error.to_string(),
            });
        }
    }
    let ids: BTreeSet<&str> = view
        .servers
        .keys()
        .map(String::as_str)
        .chain(task.allowed_server_ids.iter().map(String::as_str))
        .chain(session.server_ids.iter().map(String::as_str))
        .collect();
    let mut servers = Vec::new();
    for id in ids {
        let spec = view.servers.get(id).and_then(|r| r.spec.as_ref());
        let mut verdict = server_verdict(task, &session, id, spec, Ok(()));
        let mut tools = Vec::new();
        if let (true, Some(spec), Some(connections)) = (verdict.offered, spec, connections) {
            match connections.catalog(id).await {
                Ok(catalog) => {
                    for tool in &catalog.tools {
                        tools.push((
                            tool.name.to_string(),
                            tool_verdict(task, &session, spec, &tool.name),
                        ));
                    }
                    for (tool, held) in &catalog.held {
                        tools.push((
                            tool.clone(),
                            Verdict {
                                offered: false,
                                layer: crate::tool_policy::Layer::Pin,
                                rule: held.sentence(id, tool),
                            },
                        ));
                    }
                    for q in &catalog.quarantined {
                        let (tool, why) = (&q.tool, &q.why);
                        tools.push((
                            tool.clone(),
                            Verdict {
                                offered: false,
                                layer: crate::tool_policy::Layer::Health,
                                rule: format!("quarantined: {why}"),
                            },
                        ));
                    }
                }
                Err(error) => {
                    verdict =
                        server_verdict(task, &session, id, Some(spec), Err(&error.to_string()))
                }
            }
        }
        let sandbox = connections
            .and_then(|c| c.status().remove(id))
            .and_then(|status| status.sandbox);
        servers.push(ServerExplanation {
            server_id: id.to_string(),
            verdict,
            tools,
            sandbox,
        });
    }
    Explanation {
        session,
        refused_writes,
        servers,
    }
}

fn verdict_json(v: &Verdict) -> Value {
    json!({"offered": v.offered, "layer": v.layer.name(), "rule": v.rule})
}

impl Explanation {
    pub fn to_json(&self) -> Value {
        json!({
            "session": {
                "mcp.enabled": self.session.enabled,
                "mcp.server_ids": self.session.server_ids,
                "mcp.tool_allowlist": self.session.tool_allowlist,
                "mcp.tool_denylist": self.session.tool_denylist,
            },
            "refused_writes": self.refused_writes.iter().map(|r| json!({"write": r.write, "error": r.error})).collect::<Vec<_>>(),
            "servers": self.servers.iter().map(|s| json!({
                "server_id": s.server_id,
                "verdict": verdict_json(&s.verdict),
                "sandbox": s.sandbox.as_ref().map(|b| json!({"state": b.label, "detail": b.detail})),
                "tools": s.tools.iter().map(|(t, v)| json!({"tool": t, "verdict": verdict_json(v)})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    /// A report for people.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "session: mcp.enabled={} mcp.server_ids={:?} mcp.tool_allowlist={:?} mcp.tool_denylist={:?}\n",
            self.session.enabled, self.session.server_ids, self.session.tool_allowlist, self.session.tool_denylist
        );
        for RefusedWrite { write, error } in &self.refused_writes {
            out.push_str(&format!("refused: {write}: {error}\n"));
        }
        let offered: usize = self
            .servers
            .iter()
            .map(|s| s.tools.iter().filter(|(_, v)| v.offered).count())
            .sum();
        out.push_str(&format!("{offered} tools offered\n\n"));
        for server in &self.servers {
            let v = &server.verdict;
            let word = if v.offered { "OFFERED" } else { "HIDDEN" };
            out.push_str(&format!(
                "{:<24} {word:<8} [{}] {}\n",
                server.server_id,
                v.layer.name(),
                v.rule
            ));
            if let Some(sandbox) = &server.sandbox {
                out.push_str(&format!("  sandbox: {}\n", sandbox.detail));
            }
            for (tool, v) in &server.tools {
                let word = if v.offered { "offered" } else { "hidden" };
                out.push_str(&format!(
                    "  {tool:<30} {word:<8} [{}] {}\n",
                    v.layer.name(),
                    v.rule
                ));
            }
        }
        out
    }
}
