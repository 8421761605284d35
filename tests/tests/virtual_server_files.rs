//! Virtual server files on the real binaries (docs/virtual-servers.md):
//! `sms validate` checks them as it checks server files and notes an
//! offered server no file declares; a running SMS reports a broken one in
//! its status with its JSON path, takes a valid one without a problem, and
//! a server file turned into a virtual server file gives its server up.

use std::time::Duration;

use spear_tests::fixtures::{stdio_server as server, write_file};
use spear_tests::procs::{bin, SmsOptions, SmsProc};
use spear_tests::wait::eventually;

const SOON: Duration = Duration::from_secs(20);
const RESEARCH: &str = r#"{"virtual_server": "research", "offers": [{"server": "fs", "tools": ["read_*"]}, {"server": "ghost"}]}"#;

fn validate(dir: &std::path::Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(bin("sms"))
        .arg("validate")
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn sms_validate_checks_virtual_servers_and_notes_a_server_no_file_declares() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "fs.json", &server("fs", "files"));
    write_file(dir.path(), "research.json", RESEARCH);
    let (code, out) = validate(dir.path());
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("research.json: virtual server 'research' offers server 'ghost', which no file here declares"),
        "{out}"
    );
    assert!(!out.contains("server 'fs', which"), "{out}");
    assert!(
        out.contains("ok: 2 files, 1 servers, 1 virtual servers"),
        "{out}"
    );

    write_file(
        dir.path(),
        "broken.json",
        r#"{"virtual_server": "research", "offers": [{"server": "fs", "aliases": {"read_file": "read file"}}]}"#,
    );
    let (code, out) = validate(dir.path());
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("broken.json: $.offers[0].aliases.read_file: 'read file' is not a tool name clients accept"),
        "{out}"
    );
    // Two files, one name: the later by name is refused, naming both.
    std::fs::remove_file(dir.path().join("broken.json")).unwrap();
    write_file(dir.path(), "copy.json", RESEARCH);
    let (code, out) = validate(dir.path());
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("research.json: virtual server 'research' is already declared in copy.json"),
        "{out}"
    );
}

fn problems(sms: &SmsProc) -> String {
    sms.status()["file_problems"].to_string()
}

/// The ids `sms servers` lists (after its revision and header lines).
fn server_ids(sms: &SmsProc) -> Vec<String> {
    let (code, out, err) = sms.client(&["servers"]);
    assert_eq!(code, 0, "{err}");
    let mut ids: Vec<String> = out
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_running_sms_reports_a_broken_virtual_server_and_takes_a_fixed_one() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "fs.json", &server("fs", "files"));
    write_file(dir.path(), "old.json", &server("old", "soon virtual"));
    write_file(
        dir.path(),
        "research.json",
        r#"{"virtual_server": "research", "ofers": []}"#,
    );
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(dir.path().into()),
        ..Default::default()
    });
    eventually("the broken virtual server to be reported", SOON, || {
        let text = problems(&sms);
        match text.contains("research.json") && text.contains("did you mean 'offers'") {
            true => Ok(()),
            false => Err(text),
        }
    });
    assert_eq!(server_ids(&sms), ["fs", "old"]);

    write_file(dir.path(), "research.json", RESEARCH);
    write_file(
        dir.path(),
        "old.json",
        r#"{"virtual_server": "later", "offers": [{"server": "fs"}]}"#,
    );
    eventually(
        "the fixed file to be taken, the turned one to give up its server",
        SOON,
        || {
            let (text, ids) = (problems(&sms), server_ids(&sms));
            match !text.contains("research.json") && ids == ["fs"] {
                true => Ok(()),
                false => Err(format!("{text} {ids:?}")),
            }
        },
    );
}
