//! The session param parser: any key and any JSON value from a guest either
//! applies or is refused without changing the session, never panics, and
//! never lets the session use a server the task does not allow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spearlet::tool_policy::{set_param, SessionPolicy, TaskPolicy};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (key, value) = text.split_once('=').unwrap_or((&text, "null"));
    let Ok(value) = serde_json::from_str::<serde_json::Value>(value) else {
        return;
    };
    let task = TaskPolicy {
        enabled: key.len() % 2 == 0,
        allowed_server_ids: vec!["fs".into(), "web".into()],
        default_server_ids: vec!["fs".into()],
        tool_allowlist: None,
        tool_denylist: vec!["rm_*".into()],
        approval: vec!["write_*".into()],
    };
    let mut session = SessionPolicy::from_task(&task);
    let before = session.clone();
    match set_param(&task, &mut session, key, &value) {
        Ok(()) => {
            assert!(session
                .server_ids
                .iter()
                .all(|id| task.allowed_server_ids.contains(id)));
            assert!(!session.enabled || task.enabled);
        }
        Err(_) => assert_eq!(session, before, "a refused write changed the session"),
    }
});
