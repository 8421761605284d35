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

mod book {
    use std::sync::Arc;

    use spear_proto::v1::{QuotaKey, QuotaMeter, TakeQuotaRequest, TaskSpec};

    use crate::oauth::per_principal::Delegation;
    use crate::oauth::{PerPrincipal, SealingKey};
    use crate::quotas::{MemoryCounters, QuotaBook, QuotaError, Refusal};
    use crate::store::MemoryStore;
    use crate::tasks::{MemoryTaskStore, TaskStore};
    use crate::watch::{Hub, HubConfig};

    /// A book over one task, "notes", whose config's quota is `quota`.
    async fn book(quota: serde_json::Value) -> (QuotaBook, Arc<SealingKey>) {
        let tasks = Arc::new(MemoryTaskStore::default());
        tasks
            .put(TaskSpec {
                id: "notes".into(),
                config_json: serde_json::json!({"quota": quota}).to_string(),
                ..TaskSpec::default()
            })
            .await
            .unwrap();
        let hub = Hub::start(Arc::new(MemoryStore::new()), HubConfig::default());
        let key = Arc::new(SealingKey::ephemeral().unwrap());
        let sealer = PerPrincipal::new(None, Some(Arc::clone(&key)));
        let book = QuotaBook::new(Arc::new(MemoryCounters::default()), tasks, hub)
            .with_delegations(Some(Arc::new(sealer)));
        (book, key)
    }

    fn take(meter: QuotaMeter) -> TakeQuotaRequest {
        TakeQuotaRequest {
            key: Some(QuotaKey {
                meter: meter as i32,
                id: "notes".into(),
                ..QuotaKey::default()
            }),
            ..TakeQuotaRequest::default()
        }
    }

    #[tokio::test]
    async fn a_node_that_never_reports_holds_one_slice_and_the_others_are_served() {
        let (book, _) = book(serde_json::json!({"tool_calls": {"max": 50, "per": "1h"}})).await;
        let calls = take(QuotaMeter::TaskToolCalls);
        let mut held = 0;
        for _ in 0..100 {
            held = book.take("rogue", &calls).await.unwrap().granted;
        }
        let honest = book.take("honest", &calls).await.unwrap();
        assert!(honest.granted >= 1, "{honest:?}");
        assert_eq!(
            honest.used,
            held + honest.granted,
            "only the rogue's last slice is counted"
        );
    }

    #[tokio::test]
    async fn spent_is_bounded_by_the_grant_for_tokens_and_ignored_for_calls() {
        let quota = serde_json::json!({"tool_calls": {"max": 50, "per": "1h"},
                                        "model_tokens": {"max": 100000, "per": "1h"}});
        let (book, _) = book(quota).await;
        let absurd = |meter| TakeQuotaRequest {
            spent: i64::MAX as u64,
            ..take(meter)
        };
        let tokens = book
            .take("rogue", &absurd(QuotaMeter::TaskModelTokens))
            .await
            .unwrap();
        assert_eq!(
            tokens.used,
            50_000 + tokens.granted,
            "half the limit past nothing granted"
        );
        let calls = book
            .take("rogue", &absurd(QuotaMeter::TaskToolCalls))
            .await
            .unwrap();
        assert_eq!(calls.used, calls.granted, "spent means nothing for calls");
        let honest = book
            .take("honest", &take(QuotaMeter::TaskModelTokens))
            .await
            .unwrap();
        assert!(honest.granted > 0, "{honest:?}");
    }

    #[tokio::test]
    async fn a_principal_counts_with_its_delegation_or_as_one_of_few_without() {
        let quota =
            serde_json::json!({"tool_calls": {"max": 50, "per": "1h"}, "per_principal": true});
        let (book, key) = book(quota).await;
        let for_principal = |principal: &str, delegation: Vec<u8>| {
            let mut request = take(QuotaMeter::TaskToolCalls);
            if let Some(k) = request.key.as_mut() {
                k.principal = principal.into();
            }
            request.delegation = delegation.into();
            request
        };
        let refused = |result: Result<_, QuotaError>| match result {
            Err(QuotaError::Refused(refusal)) => refusal,
            other => panic!("not refused: {other:?}"),
        };
        for i in 0..crate::quotas::principals::MAX_UNSEALED {
            book.take("rogue", &for_principal(&format!("made-up-{i}"), vec![]))
                .await
                .unwrap();
        }
        let past = refused(book.take("rogue", &for_principal("one more", vec![])).await);
        assert!(matches!(past, Refusal::Principals { .. }), "{past}");
        assert!(
            past.to_string()
                .contains("named more than 32 principals of task 'notes'"),
            "{past}"
        );
        let long = refused(
            book.take("rogue", &for_principal(&"x".repeat(2_000), vec![]))
                .await,
        );
        assert!(
            long.to_string()
                .contains("a principal is at most 1024 bytes"),
            "{long}"
        );
        // A run SMS sent: its delegation is proof, however many there are.
        let sealed = |node: &str, who: &str| {
            Delegation::new(node, who, "token", std::time::Duration::from_secs(60))
                .seal(&key)
                .unwrap()
        };
        book.take("rogue", &for_principal("alice", sealed("rogue", "alice")))
            .await
            .unwrap();
        // Another node's delegation, or one for another principal: refused.
        let stolen = refused(
            book.take("rogue", &for_principal("bob", sealed("honest", "bob")))
                .await,
        );
        assert!(
            stolen
                .to_string()
                .contains("sealed for node 'honest', not 'rogue'"),
            "{stolen}"
        );
        let other = refused(
            book.take("rogue", &for_principal("bob", sealed("rogue", "alice")))
                .await,
        );
        assert!(
            other
                .to_string()
                .contains("for principal 'alice', not 'bob'"),
            "{other}"
        );
    }
}
