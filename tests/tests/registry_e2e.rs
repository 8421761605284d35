//! The registry plane end to end: the real `sms` binary on a real directory,
//! a real `spearlet` syncing from it over gRPC. `sms validate` and the
//! secrets in files are in registry_files.rs.

use std::time::Duration;

use serde_json::Value;
use spear_tests::fixtures::{stdio_server as server, write_file};
use spear_tests::history::{converged, sms_registry, Applied};
use spear_tests::procs::{SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::eventually;

const SOON: Duration = Duration::from_secs(10);

/// The node's servers as (id, description) pairs, sorted.
fn node_servers(node: &SpearletProc) -> Result<Vec<(String, String)>, String> {
    let registry = node.registry()?;
    let servers = registry["servers"]
        .as_array()
        .ok_or(format!("no servers array: {registry}"))?;
    let mut out: Vec<(String, String)> = servers
        .iter()
        .map(|s| {
            let spec = &s["spec"];
            (
                spec["id"].as_str().unwrap_or_default().to_string(),
                spec["description"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    Ok(out)
}

fn wait_node_has(node: &SpearletProc, expected: &[(&str, &str)]) {
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    eventually("the node's registry", SOON, || {
        let got = node_servers(node)?;
        if got == expected {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    });
}

/// Proves that a file SMS has already judged (its problem is reported)
/// changed nothing since `revision`: a later good file is applied and
/// reaches the node, and the registry moved by that one change only. Then
/// the later file goes again and the node holds `expected`.
fn nothing_else_moved(
    dir: &std::path::Path,
    sms: &SmsProc,
    node: &SpearletProc,
    revision: u64,
    expected: &[(&str, &str)],
) {
    let mut with_later = expected.to_vec();
    with_later.push(("later", "barrier"));
    with_later.sort();
    write_file(dir, "later.json", &server("later", "barrier"));
    wait_node_has(node, &with_later);
    assert_eq!(sms.status()["revision"].as_u64(), Some(revision + 1));
    std::fs::remove_file(dir.join("later.json")).unwrap();
    wait_node_has(node, expected);
}

fn file_problems(sms: &SmsProc) -> Vec<Value> {
    sms.status()["file_problems"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn file_add_change_delete_reach_the_node() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "a.json", &server("alpha", "first"));
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node = SpearletProc::start("node-1", &sms.grpc, &state.path().join("n1"));
    wait_node_has(&node, &[("alpha", "first")]);

    write_file(dir.path(), "b.json", &server("beta", "dropped in"));
    wait_node_has(&node, &[("alpha", "first"), ("beta", "dropped in")]);

    write_file(dir.path(), "a.json", &server("alpha", "changed"));
    wait_node_has(&node, &[("alpha", "changed"), ("beta", "dropped in")]);

    std::fs::remove_file(dir.path().join("b.json")).unwrap();
    wait_node_has(&node, &[("alpha", "changed")]);

    // A rename keeps the server: one change (its source), never a delete
    // then an add the node could see in between.
    let before = converged(&sms, &node);
    let revision = sms.status()["revision"].as_u64().unwrap();
    std::fs::rename(dir.path().join("a.json"), dir.path().join("renamed.json")).unwrap();
    eventually("the server to move to renamed.json", SOON, || {
        let (_, out, _) = sms.client(&["servers"]);
        if out.contains("file:renamed.json") {
            Ok(())
        } else {
            Err(out)
        }
    });
    wait_node_has(&node, &[("alpha", "changed")]);
    let after = converged(&sms, &node);
    assert_eq!(sms.status()["revision"].as_u64(), Some(revision + 1));
    assert_eq!(
        &after[before.len()..],
        &[Applied::Delta {
            epoch: sms.status()["epoch"].as_u64().unwrap(),
            prev: revision,
            revision: revision + 1
        }],
        "the node applied the rename as one change"
    );

    // SMS sees the node converge.
    eventually("sms status to show the node converged", SOON, || {
        let status = sms.status();
        let nodes = status["nodes"].as_array().cloned().unwrap_or_default();
        match nodes.iter().find(|n| n["node_id"] == "node-1") {
            Some(n) if n["lag"] == 0 && n["applied_revision"] == status["revision"] => Ok(()),
            _ => Err(status.to_string()),
        }
    });
    // And timed each change's way there: one observation per change the
    // node applied after its first heartbeat, parsed by Prometheus's parser.
    let metrics = spear_tests::http::get(&sms.metrics, "/metrics").unwrap();
    let families = spear_tests::peers::parse_openmetrics(&metrics).unwrap();
    assert!(
        families.iter().any(|f| f == "sms_propagation_seconds"),
        "{families:?}"
    );
    let count: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sms_propagation_seconds_count "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(count >= 1, "{metrics}");
}

#[test]
fn a_bad_file_is_reported_and_its_last_good_version_stays() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "fs.json", &server("fs", "good"));
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node = SpearletProc::start("node-1", &sms.grpc, &state.path().join("n1"));
    wait_node_has(&node, &[("fs", "good")]);
    let revision = sms.status()["revision"].as_u64().unwrap();

    // A typo in a key: rejected with the file, the path and a suggestion.
    write_file(
        dir.path(),
        "fs.json",
        r#"{"id": "fs", "description": "typo", "command": "npx", "allowd_tools": ["read_*"]}"#,
    );
    let problems = eventually("the bad file to be reported", SOON, || {
        let problems = file_problems(&sms);
        if problems.is_empty() {
            Err("no problems yet".into())
        } else {
            Ok(problems)
        }
    });
    let text = serde_json::to_string(&problems).unwrap();
    assert!(text.contains("fs.json"), "{text}");
    assert!(
        text.contains("allowd_tools") && text.contains("allowed_tools"),
        "{text}"
    );

    // Nothing changed for the node or the registry.
    nothing_else_moved(dir.path(), &sms, &node, revision, &[("fs", "good")]);

    // Invalid JSON too, then a fix clears the problem.
    write_file(dir.path(), "fs.json", "{\"id\": \"fs\", ");
    eventually("the JSON error to be reported", SOON, || {
        let text = serde_json::to_string(&file_problems(&sms)).unwrap();
        if text.contains("fs.json") && text.contains("line") {
            Ok(())
        } else {
            Err(text)
        }
    });
    wait_node_has(&node, &[("fs", "good")]);
    write_file(dir.path(), "fs.json", &server("fs", "fixed"));
    wait_node_has(&node, &[("fs", "fixed")]);
    assert!(file_problems(&sms).is_empty());
    converged(&sms, &node);
}

#[test]
fn a_duplicate_id_across_files_names_both_files() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "first.json", &server("shared", "from first"));
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node = SpearletProc::start("node-1", &sms.grpc, &state.path().join("n1"));
    wait_node_has(&node, &[("shared", "from first")]);
    let revision = sms.status()["revision"].as_u64().unwrap();

    write_file(dir.path(), "second.json", &server("shared", "from second"));
    let text = eventually("the duplicate to be reported", SOON, || {
        let text = serde_json::to_string(&file_problems(&sms)).unwrap();
        if text.contains("shared") {
            Ok(text)
        } else {
            Err(text)
        }
    });
    assert!(
        text.contains("first.json") && text.contains("second.json"),
        "{text}"
    );
    nothing_else_moved(
        dir.path(),
        &sms,
        &node,
        revision,
        &[("shared", "from first")],
    );

    // Removing the first file lets the second one take the id.
    std::fs::remove_file(dir.path().join("first.json")).unwrap();
    wait_node_has(&node, &[("shared", "from second")]);
    converged(&sms, &node);
}

const TOKEN: Option<&str> = Some("t0ken-value-0123456");

#[test]
fn admin_writes_need_the_token_and_never_touch_file_servers() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "fs.json", &server("fs", "from a file"));
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        admin_token: Some("t0ken-value-0123456".into()),
        ..Default::default()
    });
    let state = tempfile::tempdir().unwrap();
    let node = SpearletProc::start("node-1", &sms.grpc, &state.path().join("n1"));
    wait_node_has(&node, &[("fs", "from a file")]);

    let spec = sms.workdir().join("api.json");
    std::fs::write(&spec, server("api", "from the admin API")).unwrap();
    let spec = spec.to_string_lossy().to_string();

    let (code, _, err) = sms.client(&["apply", &spec]);
    assert_ne!(code, 0);
    assert!(err.contains("token"), "{err}");
    let (code, _, err) = sms.client_with_token(&["apply", &spec], Some("wrong"));
    assert_ne!(code, 0);
    assert!(err.contains("token is wrong"), "{err}");
    assert!(!err.contains("t0ken-value"), "the real token leaked: {err}");

    let (code, out, err) = sms.client_with_token(&["apply", &spec], TOKEN);
    assert_eq!(code, 0, "{out} {err}");
    wait_node_has(
        &node,
        &[("api", "from the admin API"), ("fs", "from a file")],
    );

    // A file's server cannot be replaced or deleted through the API.
    let hijack = sms.workdir().join("hijack.json");
    std::fs::write(&hijack, server("fs", "hijacked")).unwrap();
    let (code, _, err) = sms.client_with_token(&["apply", &hijack.to_string_lossy()], TOKEN);
    assert_ne!(code, 0);
    assert!(err.contains("fs.json"), "{err}");
    let (code, _, err) = sms.client_with_token(&["delete", "fs"], TOKEN);
    assert_ne!(code, 0);
    assert!(err.contains("fs.json"), "{err}");

    // And a file cannot take an id the API owns.
    write_file(dir.path(), "api.json", &server("api", "file wants it"));
    eventually("the ownership conflict to be reported", SOON, || {
        let text = serde_json::to_string(&file_problems(&sms)).unwrap();
        if text.contains("admin API") {
            Ok(())
        } else {
            Err(text)
        }
    });

    let (code, _, err) = sms.client_with_token(&["delete", "api"], TOKEN);
    assert_eq!(code, 0, "{err}");
    // The file now gets the id on its next scan.
    wait_node_has(&node, &[("api", "file wants it"), ("fs", "from a file")]);
}

/// Whole scans of the directory SMS has made.
fn scans(sms: &SmsProc) -> f64 {
    spear_tests::http::metric(&sms.metrics, "sms_mcp_dir_scans_total")
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn reading_the_directory_does_not_count_as_changing_it() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "b", "c"] {
        write_file(dir.path(), &format!("{name}.json"), &server(name, name));
    }
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    eventually("the directory to be loaded", SOON, || match scans(&sms) {
        n if n >= 1.0 => Ok(()),
        n => Err(format!("{n} scans")),
    });
    // Each scan reads every file. Were those reads taken for changes,
    // each scan would start the next one, 20 a second; an untouched
    // directory is rescanned only every 10 s. What is asserted is an
    // absence, so it takes a window; nothing races it: a slower machine
    // only lengthens the window, and one periodic rescan may fall in it.
    // (`files::watcher`'s table test checks the rule itself, timelessly.)
    let first = scans(&sms);
    std::thread::sleep(Duration::from_secs(3));
    let after = scans(&sms);
    assert!(
        after <= first + 1.0,
        "SMS scanned an untouched directory {} times in 3 s",
        after - first
    );
    // A real change still is one.
    write_file(dir.path(), "d.json", &server("d", "d"));
    eventually("the new file's server", SOON, || {
        let (_, _, servers) = sms_registry(&sms.grpc)?;
        match servers.iter().any(|(id, _)| id == "d") {
            true => Ok(()),
            false => Err(format!("{servers:?}")),
        }
    });
}
