//! What the node does around a guest's run, on the real `sms` and `spearlet` binaries: a guest
//! whose caller went away is stopped, and nothing is loaded from the compiled-module cache that
//! the node did not write.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use spear_tests::guest_wat::wat;
use spear_tests::invoke::invoke;
use spear_tests::procs::bin;
use spear_tests::tasks::{cluster_opts, fs_task, guest, register, ClusterOptions};

/// A cancelled invocation stops its guest: the caller goes away and the
/// node's run slot comes back long before the guest's wall limit.
#[test]
fn a_dropped_invocation_stops_its_guest() {
    let c = cluster_opts("cancel", ClusterOptions::default());
    let path = c.modules.join("spin.wat");
    std::fs::write(
        &path,
        wat(r#"(func (export "_start") (loop (drop (call $close (i32.const -1))) (br 0)))"#),
    )
    .unwrap();
    let config = json!({"limits": {"wall_ms": 600000, "cpu_ms": 600000}});
    let (code, _, err) = register(&c, "forever", &path, &config, &[]);
    assert_eq!(code, 0, "{err}");
    let addr = c.node.status().unwrap()["invoke_addr"]
        .as_str()
        .unwrap()
        .to_string();
    let mut caller = Command::new(bin("sms"))
        .args([
            "invoke",
            "forever",
            "--node-addr",
            &addr,
            "--addr",
            &c.sms.grpc,
        ])
        .env_remove("SMS_ADMIN_TOKEN")
        .spawn()
        .unwrap();
    let in_progress = |c: &spear_tests::tasks::Cluster| {
        let metrics = spear_tests::http::get(&c.node.http, "/metrics").unwrap_or_default();
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("spearlet_guest_runs_in_progress "))
            .map(str::to_string)
    };
    spear_tests::wait::eventually(
        "the run to start",
        Duration::from_secs(30),
        || match in_progress(&c).as_deref() {
            Some("1") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    caller.kill().unwrap();
    caller.wait().unwrap();
    spear_tests::wait::eventually(
        "the run to stop",
        Duration::from_secs(10),
        || match in_progress(&c).as_deref() {
            Some("0") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
}

/// The compiled-module cache runs native code, so the node loads nothing
/// from it that it did not write: an artifact changed on disk is refused
/// (with a log line) and the module compiled again from its checked source.
#[test]
fn a_tampered_compiled_module_is_not_loaded() {
    let c = cluster_opts("compiled once", ClusterOptions::default());
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let (code, run, err, _) = invoke(&c.sms.grpc, "fs-agent");
    assert_eq!(code, Some(0), "{run} {err}");

    let compiled = c.node.state_dir.join("compiled");
    let artifacts: Vec<_> = std::fs::read_dir(&compiled)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&c.node.state_dir), 0o700);
    assert_eq!(mode(&artifacts[0]), 0o600);

    // Change one byte of the compiled code, as a local attacker would.
    let mut bytes = std::fs::read(&artifacts[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&artifacts[0], &bytes).unwrap();

    let spear_tests::tasks::Cluster {
        sms,
        node,
        _models,
        files,
        modules,
        work,
    } = c;
    let node = node.restart();
    let addr = spear_tests::wait::eventually("the node to listen", Duration::from_secs(30), || {
        node.status()?["invoke_addr"]
            .as_str()
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .ok_or_else(|| "no invoke_addr yet".to_string())
    });
    let out = Command::new(bin("sms"))
        .args([
            "invoke",
            "--json",
            "fs-agent",
            "--node-addr",
            &addr,
            "--addr",
            &sms.grpc,
        ])
        .env_remove("SMS_ADMIN_TOKEN")
        .output()
        .unwrap();
    let run: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        run["ok"],
        true,
        "{run} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        run["stdout"].as_str().unwrap().contains("compiled once"),
        "{run}"
    );
    let log = node.proc.log();
    assert!(log.contains("fails its integrity check"), "{log}");
    assert_ne!(
        std::fs::read(&artifacts[0]).unwrap(),
        bytes,
        "compiled again and rewritten"
    );
    drop((sms, node, _models, files, modules, work));
}
