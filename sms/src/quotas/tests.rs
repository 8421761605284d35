use spear_proto::v1::{QuotaKey, QuotaMeter};

use super::counter_key;

fn key(meter: QuotaMeter, principal: &str) -> QuotaKey {
    QuotaKey {
        meter: meter as i32,
        id: "notes".into(),
        tool: "search".into(),
        principal: principal.into(),
    }
}

#[test]
fn each_principal_counts_apart_only_when_the_quota_says_so() {
    let alice = key(QuotaMeter::TaskToolCalls, "https://idp#alice");
    let bob = key(QuotaMeter::TaskToolCalls, "https://idp#bob");
    assert_eq!(counter_key(&alice, false), "task/notes/tool_calls");
    assert_eq!(counter_key(&alice, false), counter_key(&bob, false));
    let (a, b) = (counter_key(&alice, true), counter_key(&bob, true));
    assert_ne!(a, b);
    assert!(
        a.starts_with("task/notes/tool_calls/") && !a.contains("alice"),
        "{a}"
    );
    // A server's counter is the fleet's, whoever the node says it is for.
    let server = key(QuotaMeter::ServerToolCalls, "https://idp#alice");
    assert_eq!(counter_key(&server, true), "server/notes/tool/search");
    assert_eq!(
        counter_key(&key(QuotaMeter::TaskCost, ""), false),
        "task/notes/cost"
    );
}
