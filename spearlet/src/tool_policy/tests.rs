//! Every refusal and every deny path of the policy, and a property: nothing
//! a guest writes can make a tool visible that the task does not allow.

use proptest::prelude::*;
use serde_json::json;
use spear_proto::v1::{ServerSpec, ToolPatterns};

use super::*;

fn task() -> TaskPolicy {
    TaskPolicy {
        enabled: true,
        allowed_server_ids: vec!["fs".into(), "web".into()],
        default_server_ids: vec!["fs".into(), "forbidden".into()],
        tool_allowlist: None,
        tool_denylist: vec!["delete_*".into()],
        approval: vec!["write_*".into()],
    }
}

fn spec(id: &str) -> ServerSpec {
    ServerSpec {
        id: id.into(),
        enabled: true,
        ..Default::default()
    }
}

#[test]
fn create_applies_task_defaults_narrowed_to_the_allowed_set() {
    let session = SessionPolicy::from_task(&task());
    assert!(session.enabled);
    assert_eq!(session.server_ids, vec!["fs"]);
    assert_eq!(session.tool_allowlist, None);
}

#[test]
fn guest_writes_that_widen_are_refused_and_change_nothing() {
    let task = task();
    let mut session = SessionPolicy::from_task(&task);
    let before = session.clone();
    for (key, value) in [
        ("mcp.task_tool_denylist", json!([])),
        ("mcp.task_tool_allowlist", json!(["*"])),
        ("mcp.task_tool_approval", json!([])),
        ("mcp.allowed_server_ids", json!(["evil"])),
        ("mcp.default_server_ids", json!(["evil"])),
        ("mcp.task_anything", json!(1)),
        ("mcp.server_ids", json!(["fs", "evil"])),
    ] {
        assert!(
            matches!(
                set_param(&task, &mut session, key, &value),
                Err(ParamError::Denied(_))
            ),
            "{key}"
        );
        assert_eq!(session, before, "{key} changed the session");
    }
    let forbidding = TaskPolicy {
        enabled: false,
        ..task.clone()
    };
    let mut closed = SessionPolicy::from_task(&forbidding);
    assert!(matches!(
        set_param(&forbidding, &mut closed, "mcp.enabled", &json!(true)),
        Err(ParamError::Denied(_))
    ));
    assert!(!closed.enabled);
    // Narrowing is always allowed.
    assert_eq!(
        set_param(&forbidding, &mut closed, "mcp.enabled", &json!(false)),
        Ok(())
    );
}

#[test]
fn narrowing_writes_succeed() {
    let task = task();
    let mut session = SessionPolicy::from_task(&task);
    set_param(
        &task,
        &mut session,
        "mcp.server_ids",
        &json!(["web", "web", "fs"]),
    )
    .unwrap();
    assert_eq!(session.server_ids, vec!["web", "fs"]);
    set_param(
        &task,
        &mut session,
        "mcp.tool_allowlist",
        &json!(["read_*"]),
    )
    .unwrap();
    set_param(
        &task,
        &mut session,
        "mcp.tool_denylist",
        &json!(["read_secret"]),
    )
    .unwrap();
    set_param(&task, &mut session, "mcp.enabled", &json!(false)).unwrap();
    assert_eq!(
        get_param(&task, &session, "mcp.tool_allowlist").unwrap(),
        json!(["read_*"])
    );
    assert_eq!(
        get_param(&task, &session, "mcp.task_tool_denylist").unwrap(),
        json!(["delete_*"])
    );
    assert_eq!(
        get_param(&task, &session, "mcp.task_tool_approval").unwrap(),
        json!(["write_*"])
    );
    set_param(&task, &mut session, "mcp.tool_allowlist", &json!(null)).unwrap();
    assert_eq!(session.tool_allowlist, None);
}

#[test]
fn tool_search_is_auto_until_the_guest_chooses() {
    let task = task();
    let mut session = SessionPolicy::from_task(&task);
    assert_eq!(
        get_param(&task, &session, "mcp.tool_search").unwrap(),
        json!("auto")
    );
    for (value, mode) in [
        ("on", ToolSearch::On),
        ("off", ToolSearch::Off),
        ("auto", ToolSearch::Auto),
    ] {
        set_param(&task, &mut session, "mcp.tool_search", &json!(value)).unwrap();
        assert_eq!(session.tool_search, mode);
        assert_eq!(
            get_param(&task, &session, "mcp.tool_search").unwrap(),
            json!(value)
        );
    }
}

#[test]
fn malformed_values_are_invalid_not_denied() {
    let task = task();
    let mut session = SessionPolicy::from_task(&task);
    for (key, value) in [
        ("mcp.enabled", json!("yes")),
        ("mcp.server_ids", json!("fs")),
        ("mcp.server_ids", json!([1])),
        ("mcp.tool_allowlist", json!([""])),
        ("mcp.tool_denylist", json!(["has space"])),
        ("mcp.tool_search", json!(true)),
        ("mcp.tool_search", json!("sometimes")),
    ] {
        assert!(
            matches!(
                set_param(&task, &mut session, key, &value),
                Err(ParamError::Invalid { .. })
            ),
            "{key} {value}"
        );
    }
    assert!(matches!(
        set_param(&task, &mut session, "mcp.bogus", &json!(1)),
        Err(ParamError::Unknown(_))
    ));
    assert!(matches!(
        get_param(&task, &session, "mcp.bogus"),
        Err(ParamError::Unknown(_))
    ));
}

#[test]
fn every_server_deny_names_its_layer() {
    let task = task();
    let session = SessionPolicy::from_task(&task);
    let fs = spec("fs");
    let check =
        |t: &TaskPolicy,
         s: &SessionPolicy,
         id: &str,
         spec: Option<&ServerSpec>,
         health: Result<(), &str>| { server_verdict(t, s, id, spec, health) };
    assert!(check(&task, &session, "fs", Some(&fs), Ok(())).offered);

    let off = TaskPolicy {
        enabled: false,
        ..task.clone()
    };
    assert_eq!(
        check(&off, &session, "fs", Some(&fs), Ok(())).layer,
        Layer::Task
    );
    let session_off = SessionPolicy {
        enabled: false,
        ..session.clone()
    };
    assert_eq!(
        check(&task, &session_off, "fs", Some(&fs), Ok(())).layer,
        Layer::Session
    );
    let v = check(&task, &session, "other", Some(&spec("other")), Ok(()));
    assert_eq!((v.offered, v.layer), (false, Layer::Task));
    let v = check(&task, &session, "web", Some(&spec("web")), Ok(()));
    assert_eq!((v.offered, v.layer), (false, Layer::Session));
    let v = check(&task, &session, "fs", None, Ok(()));
    assert_eq!((v.offered, v.layer), (false, Layer::Registry));
    let disabled = ServerSpec {
        enabled: false,
        ..fs.clone()
    };
    assert_eq!(
        check(&task, &session, "fs", Some(&disabled), Ok(())).layer,
        Layer::Server
    );
    let v = check(
        &task,
        &session,
        "fs",
        Some(&fs),
        Err("exited with status 1"),
    );
    assert_eq!((v.offered, v.layer), (false, Layer::Health));
    assert!(v.rule.contains("exited with status 1"));
}

#[test]
fn every_tool_deny_names_its_layer_and_deny_wins() {
    let task = task();
    let mut session = SessionPolicy::from_task(&task);
    let mut fs = spec("fs");
    assert!(tool_verdict(&task, &session, &fs, "read_file").offered);

    assert_eq!(
        tool_verdict(&task, &session, &fs, "delete_file").layer,
        Layer::Task
    );
    fs.denied_tools = vec!["write_*".into()];
    assert_eq!(
        tool_verdict(&task, &session, &fs, "write_file").layer,
        Layer::Server
    );
    session.tool_denylist = vec!["read_secret".into()];
    assert_eq!(
        tool_verdict(&task, &session, &fs, "read_secret").layer,
        Layer::Session
    );

    fs.allowed_tools = Some(ToolPatterns { patterns: vec![] });
    let v = tool_verdict(&task, &session, &fs, "read_file");
    assert_eq!((v.offered, v.layer), (false, Layer::Server));
    assert!(v.rule.contains("empty"));
    fs.allowed_tools = Some(ToolPatterns {
        patterns: vec!["read_*".into(), "write_*".into()],
    });
    assert!(!tool_verdict(&task, &session, &fs, "list_dir").offered);
    // Deny wins over allow at the same layer.
    assert!(!tool_verdict(&task, &session, &fs, "write_file").offered);

    let narrow_task = TaskPolicy {
        tool_allowlist: Some(vec!["read_file".into()]),
        ..task.clone()
    };
    let v = tool_verdict(&narrow_task, &session, &fs, "read_dir");
    assert_eq!((v.offered, v.layer), (false, Layer::Task));
    session.tool_allowlist = Some(vec!["read_dir".into()]);
    let v = tool_verdict(&task, &session, &fs, "read_file");
    assert_eq!((v.offered, v.layer), (false, Layer::Session));
}

proptest! {
    /// Whatever a guest writes, what it ends up seeing is within what the
    /// task alone allows.
    #[test]
    fn guest_writes_only_narrow(
        writes in proptest::collection::vec((
            prop_oneof![
                Just("mcp.enabled"), Just("mcp.server_ids"), Just("mcp.tool_allowlist"),
                Just("mcp.tool_denylist"), Just("mcp.task_tool_denylist"), Just("mcp.allowed_server_ids"),
            ],
            prop_oneof![
                Just(json!(true)), Just(json!(false)), Just(json!(null)), Just(json!(["*"])),
                Just(json!(["fs", "web", "evil"])), Just(json!(["web"])), Just(json!(["delete_*"])), Just(json!([])),
            ],
        ), 0..12),
        server in prop_oneof![Just("fs"), Just("web"), Just("evil")],
        tool in prop_oneof![Just("read_file"), Just("delete_file"), Just("anything")],
    ) {
        let task = task();
        let mut session = SessionPolicy::from_task(&task);
        for (key, value) in &writes {
            let _ = set_param(&task, &mut session, key, value);
        }
        let wide_open = SessionPolicy {
            enabled: true,
            server_ids: task.allowed_server_ids.clone(),
            tool_allowlist: None,
            tool_denylist: vec![],
            tool_search: Default::default(),
        };
        let spec = spec(server);
        let guest = server_verdict(&task, &session, server, Some(&spec), Ok(())).offered
            && tool_verdict(&task, &session, &spec, tool).offered;
        let task_alone = server_verdict(&task, &wide_open, server, Some(&spec), Ok(())).offered
            && tool_verdict(&task, &wide_open, &spec, tool).offered;
        prop_assert!(!guest || task_alone, "guest sees {server}/{tool} that the task forbids");
    }
}
