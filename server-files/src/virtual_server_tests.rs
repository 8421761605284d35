//! The virtual server file rules, as an operator meets them.

use super::tests::joined;
use super::*;

fn declared(text: &str) -> spear_proto::v1::VirtualServerSpec {
    match parse_declared("research.json", text.as_bytes(), None) {
        Ok(Declared::Virtual(spec)) => spec,
        other => panic!("expected a virtual server, got {other:?}"),
    }
}

fn problems(text: &str) -> String {
    match parse_declared("research.json", text.as_bytes(), None) {
        Err(problems) => joined(&problems),
        Ok(other) => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn a_virtual_server_with_every_field() {
    let spec = declared(
        r#"{
          "virtual_server": "research",
          "description": "What research agents may use",
          "offers": [
            {"server": "fs", "tools": ["read_*", "list_directory"]},
            {"server": "github", "aliases": {"search_repositories": "gh_search"}}
          ],
          "invokers": ["group:research", "subject:alice"],
          "tool_search": true
        }"#,
    );
    assert_eq!(spec.name, "research");
    assert_eq!(spec.offers.len(), 2);
    assert_eq!(spec.offers[0].server_id, "fs");
    let fs_tools = spec.offers[0].tools.as_ref().map(|t| t.patterns.clone());
    assert_eq!(
        fs_tools,
        Some(vec!["read_*".into(), "list_directory".into()])
    );
    assert_eq!(
        spec.offers[1].tools, None,
        "absent: every tool the server allows"
    );
    assert_eq!(spec.offers[1].aliases["search_repositories"], "gh_search");
    assert_eq!(spec.invokers, ["group:research", "subject:alice"]);
    assert!(spec.tool_search);
}

#[test]
fn every_mistake_is_named_at_its_path_at_once() {
    let text = problems(
        r#"{
          "virtual_server": "Research Tools",
          "ofers": [],
          "invokers": ["everyone"],
          "tool_search": "yes"
        }"#,
    );
    for expected in [
        "research.json: $.virtual_server: 'Research Tools' is not a virtual server name",
        "$.ofers: unknown key 'ofers'; did you mean 'offers'?",
        "research.json: $: offers no tools",
        "$.invokers[0]:",
        "$.tool_search: expected true or false",
    ] {
        assert!(text.contains(expected), "{expected}\n---\n{text}");
    }
}

#[test]
fn offers_name_real_ids_once_with_valid_patterns_and_aliases() {
    let text = problems(
        r#"{
          "virtual_server": "v",
          "offers": [
            {"server": "fs", "tools": [""], "aliases": {"a": "x y", "b": "same", "c": "same"}},
            {"server": "fs"},
            {"server": "Bad!"},
            {"tools": ["*"]},
            "fs",
            {"server": "git", "alias": {}}
          ]
        }"#,
    );
    for expected in [
        "$.offers[0].tools[0]: is an empty pattern",
        "$.offers[0].aliases.a: 'x y' is not a tool name clients accept",
        "$.offers[0].aliases.c: 'same' is already the alias of 'b'",
        "$.offers[1].server: server 'fs' is offered twice",
        "$.offers[2].server: server id 'Bad!'",
        "$.offers[3]: missing \"server\"",
        "$.offers[4]: expected an offer",
        "$.offers[5].alias: unknown key 'alias'; did you mean 'aliases'?",
    ] {
        assert!(text.contains(expected), "{expected}\n---\n{text}");
    }
}

#[test]
fn control_characters_in_a_name_never_reach_the_sentence() {
    let text = problems(r#"{"virtual_server": "a\u001b[2Jb", "offers": [{"server": "fs"}]}"#);
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains("\\u{1b}[2J"), "{text}");
}

#[test]
fn a_virtual_server_file_declares_no_server() {
    let text = r#"{"virtual_server": "v", "offers": [{"server": "fs"}]}"#;
    let refused = match parse_file("v.json", text.as_bytes()) {
        Err(problems) => joined(&problems),
        Ok(specs) => panic!("{specs:?}"),
    };
    assert!(
        refused.contains("declares the virtual server 'v', not a server"),
        "{refused}"
    );
}

#[test]
fn the_directory_names_each_virtual_server_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = r#"{"virtual_server": "v", "offers": [{"server": "fs"}]}"#;
    std::fs::write(dir.path().join("a.json"), file).unwrap();
    std::fs::write(dir.path().join("b.json"), file).unwrap();
    std::fs::write(
        dir.path().join("fs.json"),
        r#"{"id": "fs", "command": "x"}"#,
    )
    .unwrap();
    let (scan, problems) = validate_dir(dir.path()).unwrap();
    let kinds: Vec<_> = scan
        .files
        .iter()
        .map(|f| matches!(f.outcome, FileOutcome::VirtualServer(_)))
        .collect();
    assert_eq!(kinds, [true, true, false]);
    let text = joined(&problems);
    assert!(
        text.contains("b.json: virtual server 'v' is already declared in a.json"),
        "{text}"
    );
}
