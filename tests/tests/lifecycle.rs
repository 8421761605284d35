//! A node's signals on the real binaries (issue 13). SIGTERM: with a long
//! run in flight, the node stops taking runs (its `/readyz` says why, SMS
//! marks it draining and routes nothing to it), lets the run finish and
//! answer, then exits 0 with none of its MCP server processes left behind
//! (SMS shows it left at once);
//! started again, SMS shows it alive and not draining, and routes to it.
//! SIGHUP: a changed node policy is in force for the next run, a file that
//! no longer parses changes nothing, and the node never restarts.

use std::time::Duration;

use serde_json::json;
use spear_tests::http::get_status as probe;
use spear_tests::tasks::{
    cluster_opts, fs_task, guest, register, replay_model_with, repo_file, ClusterOptions,
};
use spear_tests::wait::eventually;

/// Processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // The fields after the command name, which may hold spaces.
        let after = stat.rsplit_once(") ").map(|(_, rest)| rest).unwrap_or("");
        let parent = after.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        if parent == Some(pid) {
            out.push(child);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
    })
}

#[test]
fn sigterm_drains_a_node_finishing_its_run_and_leaving_no_mcp_child() {
    // A model that takes its time: each answer comes after 2.5 s.
    let slow = tempfile::tempdir().unwrap();
    let (_model, url) = replay_model_with(
        slow.path(),
        "slow",
        &repo_file("examples/replay/fs-agent.json"),
        slow.path(),
        "127.0.0.1:0",
        &["--delay-ms", "2500"],
    );
    let backend = format!(
        "[llm.backends.slow]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"recorded\"\n"
    );
    let mut c = cluster_opts(
        "drain notes",
        ClusterOptions {
            node_toml: &backend,
            ..Default::default()
        },
    );
    let mut task = fs_task();
    task["llm"] = json!({"backend": "slow"});
    let (code, _, err) = register(&c, "slow", &guest("fs-agent"), &task, &[]);
    assert_eq!(code, 0, "{err}");

    let sms = &c.sms;
    let http = c.node.http.clone();
    std::thread::scope(|scope| {
        let run = scope.spawn(|| sms.client(&["invoke", "slow"]));
        eventually("the run to be in flight", Duration::from_secs(30), || {
            let status = c.node.status()?;
            (status["guest_runs"]["in_progress"] == 1)
                .then_some(())
                .ok_or(status.to_string())
        });
        let node_pid = c.node.proc.pid().unwrap();
        // The session listed the filesystem server's tools: its process runs.
        let mcp_children = eventually("the MCP server to run", Duration::from_secs(30), || {
            let kids = children(node_pid);
            (!kids.is_empty())
                .then_some(kids)
                .ok_or("none yet".to_string())
        });

        c.node.proc.signal("TERM");
        eventually(
            "readiness to go false",
            Duration::from_secs(10),
            || match probe(&http, "/readyz")? {
                (503, body) if body.contains("shutting down") => Ok(()),
                other => Err(format!("{other:?}")),
            },
        );
        eventually("SMS to see the drain", Duration::from_secs(10), || {
            let status = sms.status();
            (status["nodes"][0]["draining"] == true)
                .then_some(())
                .ok_or(status.to_string())
        });
        // Meanwhile nothing is routed to it.
        let (code, out, err) = sms.client(&["invoke", "slow"]);
        assert_ne!(code, 0, "{out}");
        assert!(err.contains("no healthy node accepts invocations"), "{err}");

        // The run in flight finishes and answers.
        let (code, out, err) = run.join().unwrap();
        assert_eq!(code, 0, "{out}{err}");
        assert!(
            out.contains("[offline replay of a recorded conversation]"),
            "{out}"
        );

        // Then the node exits, cleanly, its MCP children gone with it.
        let status = eventually("the node to exit", Duration::from_secs(30), || {
            c.node.proc.exit_status().ok_or("still running".to_string())
        });
        assert!(status.success(), "{status:?}\n{}", c.node.proc.log());
        for pid in mcp_children {
            assert!(!alive(pid), "MCP server process {pid} outlived the node");
        }
        let log = c.node.proc.log();
        assert!(log.contains("draining: taking no more runs"), "{log}");
        assert!(log.contains("drained: no run in progress"), "{log}");
        // It ended its follow stream on the way out: SMS shows it left,
        // not alive, rather than alive until its report grows old.
        let node = sms.status()["nodes"][0].clone();
        assert_eq!(node["left"], true, "{node}");
        assert_eq!(node["alive"], false, "{node}");
    });

    // Started again (on a new Invocation port), the node is alive and
    // takes runs as soon as SMS hears it: its row is the new life's, no
    // longer the drain of its last.
    let before = sms.status()["nodes"][0]["invoke_addr"].clone();
    c.node.start_in_place();
    let row = eventually(
        "SMS to hear the node again",
        Duration::from_secs(30),
        || {
            let status = sms.status();
            let node = &status["nodes"][0];
            (node["invoke_addr"] != before && node["alive"] == true)
                .then(|| node.clone())
                .ok_or(status.to_string())
        },
    );
    assert_eq!(row["draining"], false, "{row}");
    let (code, out, err) = c.sms.client(&["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("(draining)"), "{out}");
    let (code, out, err) = c.sms.client(&["invoke", "slow"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn sighup_puts_a_changed_node_policy_in_force_and_keeps_it_when_the_file_is_bad() {
    let c = cluster_opts("hup notes", ClusterOptions::default());
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let invoke = || {
        let (code, out, err) = c.sms.client(&["invoke", "fs-agent"]);
        (code, format!("{out}{err}"))
    };
    let (code, out) = invoke();
    assert_eq!(code, 0, "{out}");

    // The operator stops taking modules from the example guests' dir.
    let toml = c.work.path().join("node.toml");
    let original = std::fs::read_to_string(&toml).unwrap();
    let guests = guest("fs-agent").parent().unwrap().display().to_string();
    let narrowed = original.replace(&format!("\"file://{guests}/\", "), "");
    assert_ne!(narrowed, original);
    std::fs::write(&toml, &narrowed).unwrap();
    c.node.proc.signal("HUP");
    eventually("the reload to be logged", Duration::from_secs(10), || {
        let log = c.node.proc.log();
        log.contains("[policy] changed and is in force")
            .then_some(())
            .ok_or("not yet".to_string())
    });
    let (code, out) = invoke();
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("policy.modules"), "{out}");

    // A file that no longer parses changes nothing, and says so.
    std::fs::write(&toml, format!("{narrowed}\n[policy.nonsense]\n")).unwrap();
    c.node.proc.signal("HUP");
    eventually("the refusal to be logged", Duration::from_secs(10), || {
        let log = c.node.proc.log();
        log.contains("reload refused: the node keeps what it had")
            .then_some(())
            .ok_or("not yet".to_string())
    });
    let (code, out) = invoke();
    assert!(code != 0 && out.contains("policy.modules"), "{out}");

    // Back as it was: in force again, no restart.
    std::fs::write(&toml, &original).unwrap();
    c.node.proc.signal("HUP");
    eventually(
        "the policy to allow the module again",
        Duration::from_secs(10),
        || {
            let (code, out) = invoke();
            (code == 0).then_some(()).ok_or(out)
        },
    );
    let mut node = c.node;
    assert!(node.proc.is_running(), "the node is the one that started");
}
