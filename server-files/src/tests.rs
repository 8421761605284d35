//! The server file rules, as an operator meets them.

use spear_proto::v1::Transport;

use super::*;

pub(super) fn problems(file: &str, text: &str) -> Vec<Problem> {
    match parse_file(file, text.as_bytes()) {
        Ok(specs) => panic!("expected problems, got {specs:?}"),
        Err(p) => p,
    }
}

pub(super) fn joined(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn native_shape_with_every_field() {
    let text = r#"{
      "id": "fs", "description": "Files", "transport": "stdio",
      "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
      "env": {"LOG_LEVEL": "warn", "API_TOKEN": "${FS_TOKEN}"}, "cwd": "/srv",
      "allowed_tools": ["read_*", "list_*"], "denied_tools": ["write_file"],
      "timeouts_ms": {"startup": 15000, "list_tools": 5000, "call": 30000},
      "limits": {"max_concurrency": 8, "max_output_bytes": 200000}, "enabled": true
    }"#;
    let specs = parse_file("fs.json", text.as_bytes()).unwrap();
    assert_eq!(specs.len(), 1);
    let s = &specs[0];
    assert_eq!(s.id, "fs");
    assert_eq!(s.transport, Transport::Stdio as i32);
    assert_eq!(
        s.env["API_TOKEN"], "${FS_TOKEN}",
        "references are kept, never resolved"
    );
    assert_eq!(
        s.allowed_tools.as_ref().unwrap().patterns,
        vec!["read_*", "list_*"]
    );
    assert_eq!(s.denied_tools, vec!["write_file"]);
    assert_eq!(s.timeouts.unwrap().call_ms, 30000);
    assert_eq!(s.limits.unwrap().max_concurrency, 8);
    assert!(s.enabled);
}

#[test]
fn allowed_tools_absent_means_all_and_empty_means_none() {
    let all = parse_file("a.json", br#"{"id": "a", "command": "x"}"#).unwrap();
    assert!(all[0].allowed_tools.is_none());
    let none = parse_file(
        "a.json",
        br#"{"id": "a", "command": "x", "allowed_tools": []}"#,
    )
    .unwrap();
    assert_eq!(
        none[0].allowed_tools.as_ref().map(|p| p.patterns.len()),
        Some(0)
    );
}

#[test]
fn shared_shape_as_claude_desktop_and_cursor_write_it() {
    let text = r#"{"mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "env": {"A": "b"}},
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "legacy": {"type": "sse", "url": "http://localhost:3001/sse"},
        "off": {"command": "x", "disabled": true}
    }}"#;
    let specs = parse_file("shared.json", text.as_bytes()).unwrap();
    let by_id = |id: &str| specs.iter().find(|s| s.id == id).unwrap();
    assert_eq!(by_id("fs").transport, Transport::Stdio as i32);
    assert_eq!(by_id("remote").transport, Transport::StreamableHttp as i32);
    assert_eq!(by_id("legacy").transport, Transport::Sse as i32);
    assert!(!by_id("off").enabled);
    // VS Code's "servers" key is the same shape.
    let vscode = parse_file(
        "v.json",
        br#"{"servers": {"x": {"type": "http", "url": "http://h/mcp"}}}"#,
    )
    .unwrap();
    assert_eq!(vscode[0].transport, Transport::StreamableHttp as i32);
}

#[test]
fn unknown_keys_name_the_path_and_the_closest_key() {
    let p = problems(
        "fs.json",
        r#"{"id": "fs", "command": "x", "allowd_tools": ["a"]}"#,
    );
    let text = joined(&p);
    assert!(
        text.contains(
            "fs.json: $.allowd_tools: unknown key 'allowd_tools'; did you mean 'allowed_tools'?"
        ),
        "{text}"
    );
    let p = problems("s.json", r#"{"mcpServers": {"fs": {"comand": "x"}}}"#);
    assert!(joined(&p).contains("$.mcpServers.fs.comand") && joined(&p).contains("'command'"));
    let p = problems(
        "t.json",
        r#"{"id": "t", "command": "x", "timeouts_ms": {"cal": 5}}"#,
    );
    assert!(joined(&p).contains("$.timeouts_ms.cal") && joined(&p).contains("'call'"));
}

#[test]
fn wrong_types_say_what_was_expected_and_found() {
    let p = problems(
        "a.json",
        r#"{"id": "a", "command": "x", "args": "not-a-list", "timeouts_ms": {"call": "30s"}}"#,
    );
    let text = joined(&p);
    assert!(
        text.contains("$.args: expected an array of strings, found a string"),
        "{text}"
    );
    assert!(
        text.contains("$.timeouts_ms.call: expected a whole number of milliseconds"),
        "{text}"
    );
    let p = problems(
        "a.json",
        r#"{"id": "a", "command": "x", "limits": {"max_concurrency": 0}}"#,
    );
    assert!(joined(&p).contains("from 1 to 1024"));
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let p = problems(
        "a.json",
        r#"{"id": "A", "command": 3, "enabled": "yes", "bogus": 1}"#,
    );
    assert!(p.len() >= 4, "{}", joined(&p));
}

#[test]
fn transports_check_their_own_fields() {
    let text = joined(&problems(
        "a.json",
        r#"{"id": "a", "command": "x", "url": "http://h"}"#,
    ));
    assert!(text.contains("both"), "{text}");
    let text = joined(&problems(
        "a.json",
        r#"{"id": "a", "transport": "stdio", "url": "http://h"}"#,
    ));
    assert!(
        text.contains("non-empty \"command\"") && text.contains("$.url"),
        "{text}"
    );
    let text = joined(&problems(
        "a.json",
        r#"{"id": "a", "transport": "sse", "url": "ftp://h", "env": {}}"#,
    ));
    assert!(
        text.contains("http:// or https://") && text.contains("$.env"),
        "{text}"
    );
    let text = joined(&problems(
        "a.json",
        r#"{"id": "a", "transport": "websocket", "url": "http://h"}"#,
    ));
    assert!(text.contains("unknown transport 'websocket'"), "{text}");
    let text = joined(&problems("a.json", r#"{"id": "a"}"#));
    assert!(text.contains("neither"), "{text}");
    assert!(parse_file("a.json", br#"{"id": "a", "url": "${REMOTE_URL}"}"#).is_ok());
}

#[test]
fn secrets_never_appear_in_messages() {
    let secret = "sk-live-0123456789";
    let text = format!(
        r#"{{"id": "a", "command": "x", "env": {{"TOKEN": "{secret} ${{BROKEN", "1BAD": "{secret}", "N": 5}}}}"#
    );
    let p = problems("a.json", &text);
    let text = joined(&p);
    assert!(
        text.contains("$.env.TOKEN") && text.contains("$.env.1BAD") && text.contains("$.env.N"),
        "{text}"
    );
    assert!(!text.contains(secret), "{text}");
    let headers =
        format!(r#"{{"id": "a", "url": "http://h", "headers": {{"Bad Header": "{secret}"}}}}"#);
    assert!(!joined(&problems("a.json", &headers)).contains(secret));
}

#[test]
fn references_are_checked_in_args_url_env_and_headers() {
    for text in [
        r#"{"id": "a", "command": "x", "args": ["${UNTERMINATED"]}"#,
        r#"{"id": "a", "url": "https://h/${1X}"}"#,
        r#"{"id": "a", "url": "https://h", "headers": {"X": "${}"}}"#,
    ] {
        assert!(parse_file("a.json", text.as_bytes()).is_err(), "{text}");
    }
    assert!(parse_file(
        "a.json",
        br#"{"id": "a", "command": "x", "args": ["$${NOT_A_REF}", "${A:-d}"]}"#
    )
    .is_ok());
}

#[test]
fn patterns_are_checked() {
    let text = joined(&problems(
        "a.json",
        r#"{"id": "a", "command": "x", "allowed_tools": ["ok_*", "", "with space"]}"#,
    ));
    assert!(
        text.contains("$.allowed_tools[1]") && text.contains("$.allowed_tools[2]"),
        "{text}"
    );
}

#[test]
fn ids_are_checked_in_both_shapes() {
    assert!(joined(&problems("a.json", r#"{"id": "Bad", "command": "x"}"#)).contains("$.id"));
    assert!(joined(&problems(
        "a.json",
        r#"{"mcpServers": {"Bad Id": {"command": "x"}}}"#
    ))
    .contains("$.mcpServers.Bad Id"));
    assert!(joined(&problems("a.json", r#"{"command": "x"}"#)).contains("declares no server"));
}

#[test]
fn file_level_problems() {
    assert!(joined(&problems("a.json", "")).contains("empty"));
    assert!(joined(&problems("a.json", "  \n")).contains("empty"));
    let bad_utf8 = parse_file("a.json", b"{\"id\": \"a\xff\"}").unwrap_err();
    assert!(joined(&bad_utf8).contains("not UTF-8") && joined(&bad_utf8).contains("offset 9"));
    let big = vec![b' '; MAX_FILE_BYTES + 1];
    assert!(joined(&parse_file("a.json", &big).unwrap_err()).contains("limit"));
    let json = joined(&problems("a.json", "{\"id\": \"a\",\n \"command\": }"));
    assert!(json.contains("invalid JSON at line 2"), "{json}");
    let bom = b"\xEF\xBB\xBF{\"id\": \"a\", \"command\": \"x\"}";
    assert!(parse_file("a.json", bom).is_ok());
    assert!(joined(&problems("a.json", "[1]")).contains("expected an object"));
}

#[test]
fn admin_requests_use_the_native_rules() {
    assert!(parse_server_json("admin request", r#"{"id": "a", "command": "x"}"#).is_ok());
    let p = parse_server_json("admin request", r#"{"mcpServers": {}}"#).unwrap_err();
    assert!(joined(&p).contains("admin request"));
}

mod dir {
    use super::*;
    use std::fs;

    #[test]
    fn scan_reads_json_files_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("a.json"), r#"{"id": "a", "command": "x"}"#).unwrap();
        fs::write(d.join("b.json"), "{").unwrap();
        fs::write(d.join(".hidden.json"), "{}").unwrap();
        fs::write(d.join("notes.txt"), "x").unwrap();
        fs::write(d.join("a.json~"), "x").unwrap();
        fs::create_dir(d.join("sub.json")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(
            outside.path().join("o.json"),
            r#"{"id": "o", "command": "x"}"#,
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path().join("o.json"), d.join("escape.json")).unwrap();
        std::os::unix::fs::symlink(d.join("a.json"), d.join("inside.json")).unwrap();
        std::os::unix::fs::symlink(d.join("missing"), d.join("dangling.json")).unwrap();

        let scan = scan_dir(d).unwrap();
        let names: Vec<&str> = scan.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "a.json",
                "b.json",
                "dangling.json",
                "escape.json",
                "inside.json"
            ]
        );
        let outcome = |n: &str| &scan.files.iter().find(|f| f.name == n).unwrap().outcome;
        assert!(matches!(outcome("a.json"), FileOutcome::Servers(s) if s.len() == 1));
        assert!(matches!(outcome("inside.json"), FileOutcome::Servers(_)));
        assert!(matches!(outcome("b.json"), FileOutcome::Invalid(_)));
        match outcome("escape.json") {
            FileOutcome::Invalid(p) => assert!(p[0].message.contains("outside"), "{p:?}"),
            other => panic!("{other:?}"),
        }
        match outcome("dangling.json") {
            FileOutcome::Invalid(p) => assert!(p[0].message.contains("dangling"), "{p:?}"),
            other => panic!("{other:?}"),
        }
        let skipped: Vec<&str> = scan.skipped.iter().map(|s| s.name.as_str()).collect();
        assert!(
            skipped.contains(&".hidden.json") && skipped.contains(&"sub.json"),
            "{skipped:?}"
        );
    }

    #[test]
    fn validate_reports_duplicates_with_both_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.json"), r#"{"id": "x", "command": "c"}"#).unwrap();
        fs::write(
            dir.path().join("b.json"),
            r#"{"mcpServers": {"x": {"command": "c"}}}"#,
        )
        .unwrap();
        let (_, problems) = validate_dir(dir.path()).unwrap();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].file, "b.json");
        assert!(problems[0].message.contains("a.json"));
    }

    #[test]
    fn a_rescan_parses_only_what_changed_since() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.json"), r#"{"id": "a", "command": "c"}"#).unwrap();
        fs::write(dir.path().join("b.json"), r#"{"id": "b", "command": "c"}"#).unwrap();
        let first = scan_dir(dir.path()).unwrap();
        let held: std::collections::HashMap<String, [u8; 32]> = first
            .files
            .iter()
            .map(|f| (f.name.clone(), f.digest))
            .collect();
        fs::write(dir.path().join("b.json"), r#"{"id": "b", "command": "d"}"#).unwrap();
        let known = |name: &str, digest: &[u8; 32]| held.get(name) == Some(digest);
        let again = scan_dir_since(dir.path(), &known).unwrap();
        assert_eq!(again.files[0].outcome, FileOutcome::Unchanged);
        assert!(
            matches!(&again.files[1].outcome, FileOutcome::Servers(s) if s[0].command == "d"),
            "a changed file is read again: {:?}",
            again.files[1].outcome
        );
    }

    #[test]
    fn oversized_files_are_rejected_unread() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("big.json"), vec![b' '; MAX_FILE_BYTES + 10]).unwrap();
        let scan = scan_dir(dir.path()).unwrap();
        assert!(
            matches!(&scan.files[0].outcome, FileOutcome::Invalid(p) if p[0].message.contains("limit"))
        );
    }
}

#[test]
fn elicitation_and_the_call_bound_are_read_and_checked() {
    let specs = parse_file(
        "ship.json",
        br#"{"id": "ship", "url": "https://mcp.example.com/mcp",
             "elicitation": "accept_defaults", "timeouts_ms": {"call": 1000, "call_max": 60000}}"#,
    )
    .unwrap();
    assert_eq!(
        specs[0].elicitation,
        spear_proto::v1::Elicitation::AcceptDefaults as i32
    );
    assert_eq!(specs[0].timeouts.unwrap().call_max_ms, 60000);
    let specs = parse_file("fs.json", br#"{"id": "fs", "command": "x"}"#).unwrap();
    assert_eq!(
        specs[0].elicitation,
        spear_proto::v1::Elicitation::Decline as i32,
        "declining is the default"
    );
    let p = problems(
        "ship.json",
        r#"{"mcpServers": {"ship": {"url": "https://x", "elicitation": "yes"}}}"#,
    );
    assert!(
        joined(&p).contains(
            "ship.json: $.mcpServers.ship.elicitation: unknown elicitation policy 'yes'; use decline or accept_defaults"
        ),
        "{}",
        joined(&p)
    );
}

#[test]
fn a_pin_mode_is_read_and_an_unknown_one_is_refused_with_the_three_modes() {
    let specs = parse_file(
        "docs.json",
        br#"{"mcpServers": {"docs": {"command": "x", "pin": "approve"}, "fs": {"command": "y"}}}"#,
    )
    .unwrap();
    let mode = |id: &str| specs.iter().find(|s| s.id == id).map(|s| s.pin.clone());
    assert_eq!(mode("docs").as_deref(), Some("approve"));
    assert_eq!(
        mode("fs").as_deref(),
        Some(""),
        "unset: the default, first-seen"
    );
    let p = problems(
        "docs.json",
        r#"{"id": "docs", "command": "x", "pin": "trust-me"}"#,
    );
    assert!(
        joined(&p).contains(
            "docs.json: $.pin: 'trust-me' is not a pin mode; use one of first-seen, approve, off (see docs/trust.md)"
        ),
        "{}",
        joined(&p)
    );
}

#[test]
fn a_server_is_scoped_to_nodes_by_globs() {
    let ok = parse_file(
        "a.json",
        br#"{"id": "a", "url": "https://h/mcp", "nodes": ["gpu-*", "node-a"], "headers": {"Authorization": "Bearer ${TOKEN}"}}"#,
    )
    .unwrap();
    assert_eq!(ok[0].nodes, vec!["gpu-*".to_string(), "node-a".to_string()]);
    let found = problems(
        "a.json",
        r#"{"id": "a", "command": "x", "nodes": ["", "a b"]}"#,
    );
    assert_eq!(found.len(), 2, "{}", joined(&found));
}
