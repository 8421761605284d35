//! The router over real connections: our misbehaving stdio server, the real
//! connection manager, the real policy.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use spear_proto::v1::{ServerSpec, Transport};
use spearlet::connections::{Connections, ServerState};
use spearlet::registry::{RegistryHandle, RegistryView};
use spearlet::tool_policy::{SessionPolicy, TaskPolicy};
use spearlet::tools::offered_name;
use spearlet::tools::Router;

fn misbehaving(id: &str) -> ServerSpec {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/peers/misbehaving_server.py"
    );
    ServerSpec {
        id: id.into(),
        transport: Transport::Stdio as i32,
        command: "python3".into(),
        args: vec![script.into()],
        denied_tools: vec!["env".into()],
        enabled: true,
        ..Default::default()
    }
}

fn registry(specs: Vec<ServerSpec>) -> RegistryHandle {
    RegistryHandle::new(RegistryView::from_specs(specs))
}

fn policies() -> (TaskPolicy, SessionPolicy) {
    let task = TaskPolicy {
        enabled: true,
        allowed_server_ids: vec!["mb".into()],
        default_server_ids: vec!["mb".into()],
        tool_allowlist: None,
        tool_denylist: vec!["spawn".into()],
        approval: Vec::new(),
    };
    let session = SessionPolicy::from_task(&task);
    (task, session)
}

#[tokio::test]
async fn offered_tools_follow_policy_and_only_they_execute() {
    let registry = registry(vec![misbehaving("mb")]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let router = Router::new(connections.clone(), registry);
    let (task, mut session) = policies();

    let set = router.tool_set(&task, &session).await;
    let names: BTreeSet<&str> = set.tools.iter().map(|t| t.tool.as_str()).collect();
    // bad_schema is quarantined, env is denied by the server, spawn by the task.
    assert_eq!(
        names,
        ["crash", "grow", "hang", "huge", "ok", "stderr"]
            .into_iter()
            .collect()
    );
    let ok = set.tools.iter().find(|t| t.tool == "ok").unwrap();
    assert_eq!(ok.name, offered_name("mb", "ok"));
    assert!(ok.description.contains("'mb'") && ok.description.contains("'ok'"));

    let outcome = router.execute(&task, &session, &set, &ok.name, "{}").await;
    assert_eq!((outcome.text.as_str(), outcome.is_error), ("ok", false));
    let compat = router.execute(&task, &session, &set, "mcp.mb.ok", "").await;
    assert!(!compat.is_error);

    // Invented names and tools that were not offered never run.
    for invented in [
        "mcp.mb.env",
        "mcp.mb.spawn",
        &offered_name("mb", "env"),
        "ok",
        "mcp__bogus",
    ] {
        let outcome = router.execute(&task, &session, &set, invented, "{}").await;
        assert!(
            outcome.is_error && outcome.executed.is_none(),
            "{invented}: {outcome:?}"
        );
    }
    // Bad arguments are an error result, not a crash.
    let outcome = router
        .execute(&task, &session, &set, &ok.name, "[1,2")
        .await;
    assert!(outcome.is_error && outcome.text.contains("not valid JSON"));

    // The policy is checked again at execution: the session narrowed since.
    session.tool_denylist = vec!["ok".into()];
    let outcome = router.execute(&task, &session, &set, &ok.name, "{}").await;
    assert!(
        outcome.is_error && outcome.executed.is_none(),
        "{outcome:?}"
    );
    assert!(
        outcome.text.contains("mcp.tool_denylist"),
        "{}",
        outcome.text
    );
    connections.shutdown().await;
}

#[tokio::test]
async fn a_crashed_server_fails_fast_then_restarts() {
    let registry = registry(vec![misbehaving("mb")]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let router = Router::new(connections.clone(), registry);
    let (task, session) = policies();
    let set = router.tool_set(&task, &session).await;
    let name = |tool: &str| offered_name("mb", tool);

    let crashed = router
        .execute(&task, &session, &set, &name("crash"), "{}")
        .await;
    assert!(
        crashed.is_error && crashed.text.contains("closed"),
        "{}",
        crashed.text
    );
    assert_eq!(connections.status()["mb"].state, ServerState::Failed);
    // Right after, the server is restarting: the call fails at once.
    let started = std::time::Instant::now();
    let early = router
        .execute(&task, &session, &set, &name("ok"), "{}")
        .await;
    assert!(
        early.is_error && early.text.contains("restart"),
        "{}",
        early.text
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // After the backoff it is back.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let back = router
        .execute(&task, &session, &set, &name("ok"), "{}")
        .await;
    assert_eq!((back.text.as_str(), back.is_error), ("ok", false));
    let status = &connections.status()["mb"];
    assert_eq!(status.restarts, 1);
    assert!(matches!(
        status.state,
        ServerState::Ready | ServerState::Degraded
    ));
    connections.shutdown().await;
}

#[tokio::test]
async fn a_registry_change_closes_exactly_that_connection() {
    let registry = registry(vec![misbehaving("mb"), misbehaving("other")]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    connections.catalog("mb").await.unwrap();
    connections.catalog("other").await.unwrap();
    assert_eq!(connections.status().len(), 2);

    let mut view = (*registry.current()).clone();
    view.revision = 2;
    view.servers.remove("mb");
    registry.publish(Arc::new(view), ["mb".to_string()].into_iter().collect());
    for _ in 0..100 {
        if !connections.status().contains_key("mb") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = connections.status();
    assert!(
        !status.contains_key("mb") && status.contains_key("other"),
        "{:?}",
        status.keys()
    );
    assert!(
        connections.catalog("mb").await.is_err(),
        "a removed server is unknown"
    );
    connections.shutdown().await;
}

#[tokio::test]
async fn list_changed_refreshes_the_catalog() {
    let registry = registry(vec![misbehaving("mb")]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let before = connections.catalog("mb").await.unwrap();
    assert!(!before.tools.iter().any(|t| t.name == "grown"));
    connections.call("mb", "grow", None).await.unwrap();
    let mut found = false;
    for _ in 0..100 {
        if connections
            .catalog("mb")
            .await
            .unwrap()
            .tools
            .iter()
            .any(|t| t.name == "grown")
        {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        found,
        "the catalog was not refreshed after tools/list_changed"
    );
    assert_eq!(
        connections.call("mb", "grown", None).await.unwrap().text,
        "I am new"
    );
    connections.shutdown().await;
}

#[tokio::test]
async fn a_slow_start_within_the_startup_timeout_works_and_beyond_it_fails() {
    let mut slow = misbehaving("slow");
    slow.env.insert("SLOW_START".into(), "1".into());
    slow.timeouts = Some(spear_proto::v1::Timeouts {
        startup_ms: 5_000,
        list_tools_ms: 0,
        call_ms: 0,
        ..Default::default()
    });
    let mut too_slow = misbehaving("too-slow");
    too_slow.env.insert("SLOW_START".into(), "3".into());
    too_slow.timeouts = Some(spear_proto::v1::Timeouts {
        startup_ms: 500,
        list_tools_ms: 0,
        call_ms: 0,
        ..Default::default()
    });
    let registry = registry(vec![slow, too_slow]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    assert!(connections.catalog("slow").await.is_ok());
    let error = connections
        .catalog("too-slow")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("startup timed out"), "{error}");
    let status = &connections.status()["too-slow"];
    assert_eq!(status.state, ServerState::Failed);
    assert!(status
        .last_error
        .as_deref()
        .unwrap_or("")
        .contains("startup"));
    connections.shutdown().await;
}

#[tokio::test]
async fn removing_a_server_from_the_registry_ends_its_grandchildren() {
    let registry = registry(vec![misbehaving("mb")]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let pid: u32 = connections
        .call("mb", "spawn", None)
        .await
        .unwrap()
        .text
        .trim()
        .parse()
        .unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    let mut view = (*registry.current()).clone();
    view.revision = 2;
    view.servers.clear();
    registry.publish(Arc::new(view), ["mb".to_string()].into_iter().collect());
    let mut gone = false;
    for _ in 0..250 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "grandchild {pid} outlived its server's removal");
}

/// Sessions run on a multi-threaded runtime: the router's futures must be Send.
#[allow(dead_code)]
fn router_futures_are_send(
    router: Router,
    task: TaskPolicy,
    session: SessionPolicy,
    set: spearlet::tools::ToolSet,
) {
    fn send<T: Send>(_: T) {}
    let r = router.clone();
    let (t, s) = (task.clone(), session.clone());
    send(async move { r.tool_set(&t, &s).await });
    send(async move { router.execute(&task, &session, &set, "x", "{}").await });
}

/// Every decision on a call is in the run's audit log, a call cut short
/// (its future dropped, as the run's deadline does) included.
#[tokio::test]
async fn each_call_is_recorded_even_one_cut_short() {
    use spearlet::trust::audit::{AuditLog, ROTATE_BYTES};
    use spearlet::trust::{NodeTrust, RunScope};

    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path(), "node-t", ROTATE_BYTES).unwrap();
    let registry = registry(vec![misbehaving("mb")]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let router = Router::new(connections.clone(), registry)
        .with_trust(NodeTrust {
            node_id: "node-t".into(),
            approvals: None,
            audit: Some(log.clone()),
            quotas: None,
            meters: Default::default(),
        })
        .for_run(RunScope {
            task_id: "t".into(),
            invocation_id: "inv-t".into(),
            identity: "sms".into(),
            deadline: None,
            ..RunScope::default()
        });
    let (task, mut session) = policies();
    let set = router.tool_set(&task, &session).await;
    let name = |tool: &str| offered_name("mb", tool);

    router
        .execute(&task, &session, &set, &name("ok"), "{}")
        .await;
    let cut = tokio::time::timeout(
        Duration::from_millis(300),
        router.execute(&task, &session, &set, &name("hang"), "{}"),
    )
    .await;
    assert!(cut.is_err(), "hang answered");
    session.tool_denylist = vec!["ok".into()];
    router
        .execute(&task, &session, &set, &name("ok"), "{}")
        .await;
    router
        .trust()
        .durable()
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let text: String = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(&str, &str)> = records
        .iter()
        .map(|r| (r["tool"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [("ok", "run"), ("hang", "failed"), ("ok", "denied")],
        "{text}"
    );
    assert!(
        records[1]["rule"].as_str().unwrap().contains("cut short"),
        "{text}"
    );
    assert!(
        records[2]["rule"]
            .as_str()
            .unwrap()
            .contains("mcp.tool_denylist"),
        "{text}"
    );
    assert_eq!(records[0]["invocation"], "inv-t");
    assert_eq!(records[0]["identity"], "sms");
    connections.shutdown().await;
}
