//! The systemd units in deploy/systemd (issue 13): `systemd-analyze verify`
//! (Debian's systemd, installed by scripts/setup.sh) accepts both without a
//! word, with their ExecStart paths pointed at the built binaries; the
//! node's unit stops every process of its control group, so no MCP child
//! outlives it; and SMS's unit validates the server directory before it
//! starts: that step, run as systemd runs it, refuses a directory holding
//! a half-written file and passes a good one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use spear_tests::procs::bin;
use spear_tests::tasks::repo_file;

/// A unit's `[Service]` settings, every value of each key in order.
fn settings(unit: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut in_service = false;
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if let (true, Some((key, value))) = (in_service, line.split_once('=')) {
            if !line.starts_with('#') {
                out.entry(key.to_string())
                    .or_default()
                    .push(value.to_string());
            }
        }
    }
    out
}

fn unit_text(name: &str) -> String {
    std::fs::read_to_string(repo_file(&format!("deploy/systemd/{name}"))).unwrap()
}

/// The unit with `/usr/local/bin/` replaced by where the binaries were built.
fn installed(name: &str, dir: &Path) -> PathBuf {
    let bins = bin("sms").parent().unwrap().display().to_string();
    let path = dir.join(name);
    std::fs::write(
        &path,
        unit_text(name).replace("/usr/local/bin/", &format!("{bins}/")),
    )
    .unwrap();
    path
}

#[test]
fn systemd_accepts_both_units_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["sms.service", "spearlet.service"] {
        let unit = installed(name, dir.path());
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&unit)
            .output()
            .unwrap_or_else(|e| {
                panic!("systemd-analyze: {e}; scripts/setup.sh installs Debian's systemd")
            });
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        let about_it: Vec<&str> = stderr.lines().filter(|l| l.contains(name)).collect();
        assert!(about_it.is_empty(), "{name}: {about_it:#?}");
    }
}

#[test]
fn no_mcp_child_outlives_the_node_and_sms_validates_first() {
    let node = settings(&unit_text("spearlet.service"));
    assert_eq!(
        node["KillMode"],
        vec!["control-group"],
        "every process of the node's group is stopped"
    );
    assert_eq!(node["ExecStart"], vec!["/usr/local/bin/spearlet run"]);

    let sms = settings(&unit_text("sms.service"));
    assert_eq!(
        sms["ExecStartPre"],
        vec!["/usr/local/bin/sms validate ${SMS_MCP_DIR}"]
    );
    assert!(sms["Environment"].contains(&"SMS_MCP_DIR=/etc/spear/mcp.d".to_string()));
    assert_eq!(
        sms["ExecStart"],
        vec!["/usr/local/bin/sms serve"],
        "serve reads the same SMS_MCP_DIR"
    );

    // The step as systemd runs it: ${SMS_MCP_DIR} from the environment.
    let step = |dir: &Path| {
        let line =
            sms["ExecStartPre"][0].replace("/usr/local/bin/sms", &bin("sms").display().to_string());
        let out = Command::new("sh")
            .arg("-c")
            .arg(line.replace("${SMS_MCP_DIR}", "\"$SMS_MCP_DIR\""))
            .env("SMS_MCP_DIR", dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let good = r#"{"mcpServers": {"fs": {"command": "mcp-server-filesystem", "args": ["/srv"]}}}"#;
    std::fs::write(dir.path().join("fs.json"), good).unwrap();
    let (code, said) = step(dir.path());
    assert_eq!(code, Some(0), "{said}");
    std::fs::write(dir.path().join("web.json"), &good[..30]).unwrap();
    let (code, said) = step(dir.path());
    assert_eq!(code, Some(1), "a half-written file stops the start: {said}");
    assert!(said.contains("web.json"), "{said}");
}
