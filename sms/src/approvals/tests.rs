use std::time::Duration;

use spear_proto::v1::{ApprovalBinding, ApprovalState};

use super::*;

/// The digest a node binds for `arguments` (the shown text of a call
/// hashes to it).
fn digest(arguments: &str) -> String {
    spear_proto::approvals::arguments_digest(arguments).unwrap_or_else(|| {
        spear_proto::pins::digest(&serde_json::Value::String(arguments.to_string()))
    })
}

fn binding(arguments: &str) -> ApprovalBinding {
    ApprovalBinding {
        node_id: "n1".into(),
        task_id: "fs-agent".into(),
        invocation_id: "inv-1".into(),
        identity: "sms".into(),
        server_id: "fs".into(),
        tool: "write_file".into(),
        arguments_digest: digest(arguments),
        pin_digest: "p1".into(),
        policy_revision: 7,
    }
}

#[tokio::test(start_paused = true)]
async fn an_approval_is_used_once_and_only_for_its_call() {
    let book = ApprovalBook::default();
    let id = book
        .request(binding("a1"), "a1".into(), Duration::ZERO)
        .await
        .unwrap()
        .approval_id;
    assert_eq!(book.show(&id).unwrap().arguments, "a1");
    // Not yet approved: nothing to claim.
    assert!(matches!(
        book.claim(&id, &binding("a1")).await,
        Err(ApprovalError::NotPending {
            state: "pending",
            ..
        })
    ));
    book.decide(&id, true, "", "admin:ops").await.unwrap();
    assert_eq!(
        book.show(&id).unwrap().arguments,
        "",
        "arguments are kept only while pending"
    );
    // Another node cannot use it, nor can other arguments or another pin.
    let mut elsewhere = binding("a1");
    elsewhere.node_id = "n2".into();
    assert!(matches!(
        book.claim(&id, &elsewhere).await,
        Err(ApprovalError::OtherNode { .. })
    ));
    assert_eq!(
        book.claim(&id, &binding("a2")).await,
        Err(ApprovalError::OtherCall {
            id: id.clone(),
            field: "arguments"
        })
    );
    let mut repinned = binding("a1");
    repinned.pin_digest = "p2".into();
    assert_eq!(
        book.claim(&id, &repinned).await,
        Err(ApprovalError::OtherCall {
            id: id.clone(),
            field: "tool definition (pin)"
        })
    );
    book.claim(&id, &binding("a1")).await.unwrap();
    assert!(matches!(
        book.claim(&id, &binding("a1")).await,
        Err(ApprovalError::NotPending { state: "used", .. })
    ));
    assert!(
        book.decide(&id, false, "", "admin:ops").await.is_err(),
        "a used approval cannot be denied"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_ends_on_the_decision_or_at_expiry() {
    let book = std::sync::Arc::new(ApprovalBook::default());
    let id = book
        .request(binding("a1"), "a1".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .approval_id;
    let waiting = {
        let (book, id) = (book.clone(), id.clone());
        tokio::spawn(async move { book.wait("n1", &id, Duration::from_secs(30)).await })
    };
    tokio::task::yield_now().await;
    book.decide(&id, false, "not on prod", "admin:ops")
        .await
        .unwrap();
    let decision = waiting.await.unwrap().unwrap();
    assert_eq!(decision.state, ApprovalState::Denied);
    assert_eq!(decision.reason, "not on prod");

    let id = book
        .request(binding("a2"), "a2".into(), Duration::from_secs(45))
        .await
        .unwrap()
        .approval_id;
    // A wait shorter than the expiry answers pending; the next one expired.
    let first = book.wait("n1", &id, Duration::from_secs(30)).await.unwrap();
    assert_eq!(first.state, ApprovalState::Pending);
    let second = book.wait("n1", &id, Duration::from_secs(30)).await.unwrap();
    assert_eq!(second.state, ApprovalState::Expired);
    assert!(
        book.decide(&id, true, "", "admin:ops").await.is_err(),
        "an expired approval cannot be approved"
    );
    assert!(matches!(
        book.wait("n2", &id, Duration::from_secs(1)).await,
        Err(ApprovalError::OtherNode { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn a_node_cannot_flood_sms_with_requests() {
    let book = ApprovalBook::default();
    for _ in 0..MAX_PENDING_PER_NODE {
        book.request(binding("a"), "a".into(), Duration::ZERO)
            .await
            .unwrap();
    }
    assert_eq!(
        book.request(binding("a"), "a".into(), Duration::ZERO)
            .await
            .map(|_| ()),
        Err(ApprovalError::TooManyForNode("n1".into()))
    );
    let big = "x".repeat(MAX_ARGUMENTS + 1);
    let mut other = binding("a");
    other.node_id = "n2".into();
    assert!(matches!(
        book.request(other, big, Duration::ZERO).await,
        Err(ApprovalError::LargeArguments(_))
    ));
}

/// One task over many nodes cannot fill the book either: past its cap
/// its requests are refused, and another task's still get through.
#[tokio::test(start_paused = true)]
async fn a_task_cannot_flood_sms_across_its_nodes() {
    let book = ApprovalBook::default();
    for i in 0..MAX_PENDING_PER_TASK {
        let mut on = binding("a");
        on.node_id = format!("n{}", i / MAX_PENDING_PER_NODE);
        book.request(on, "a".into(), Duration::ZERO).await.unwrap();
    }
    let mut next = binding("a");
    next.node_id = "n-last".into();
    assert_eq!(
        book.request(next.clone(), "a".into(), Duration::ZERO)
            .await
            .map(|_| ()),
        Err(ApprovalError::TooManyForTask("fs-agent".into()))
    );
    next.task_id = "other-task".into();
    assert!(book.request(next, "a".into(), Duration::ZERO).await.is_ok());
}

/// What an operator reads must be what the approval binds: arguments that
/// do not hash to the digest are refused; where the node redacted a
/// secret (SMS cannot hash what it never sees) they are kept, marked.
#[tokio::test(start_paused = true)]
async fn shown_arguments_must_hash_to_the_bound_digest() {
    let book = ApprovalBook::default();
    let bound = binding(r#"{"path": "/etc/shadow"}"#);
    assert_eq!(
        book.request(
            bound.clone(),
            r#"{"path": "/tmp/ok"}"#.into(),
            Duration::ZERO
        )
        .await
        .map(|_| ()),
        Err(ApprovalError::ShownNotBound)
    );
    // The same arguments, written differently, hash the same.
    assert!(book
        .request(bound, r#"{ "path":"/etc/shadow" }"#.into(), Duration::ZERO)
        .await
        .is_ok());
    let secret = binding(r#"{"token": "s3cret"}"#);
    assert!(book
        .request(secret, r#"{"token": "<redacted>"}"#.into(), Duration::ZERO)
        .await
        .is_ok());
}
