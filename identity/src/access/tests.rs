//! Tests of the access matrix: which caller each port lets through, on plaintext and TLS ports.

use super::*;
use crate::token::JOIN_TOKEN_HEADER;

fn request(join: Option<&str>) -> Request<()> {
    let mut request = Request::new(());
    if let Some(token) = join {
        request
            .metadata_mut()
            .insert(JOIN_TOKEN_HEADER, token.parse().unwrap());
    }
    request
}

const SECRET: &str = "sms-secret-0123456789abcdef";

/// SMS's plaintext port, and node-a's and node-b's tokens.
fn sms() -> (Access, String, String) {
    let tokens = NodeTokens::new(JoinToken::fixed(SECRET));
    let a = tokens.node_token("node-a").unwrap_or_default();
    let b = tokens.node_token("node-b").unwrap_or_default();
    let access =
        Access::new(false, AdminToken::fixed("admin-0123456789abcdef")).with_node_tokens(tokens);
    (access, a, b)
}

#[test]
fn on_smss_plaintext_port_a_node_is_the_node_its_token_names() {
    let (access, a, b) = sms();
    for anonymous in [request(None), request(Some("join-wrong-wrong-wrong"))] {
        assert!(access.node(&anonymous, "node-a", "heartbeat").is_err());
        assert!(access.reader(&anonymous, "registry watch").is_err());
        assert!(access.any_node(&anonymous, "access token").is_err());
    }
    let refused = access
        .node(&request(None), "node-a", "heartbeat")
        .unwrap_err();
    assert!(
        refused.message().contains("sms nodes join-token"),
        "{}",
        refused.message()
    );
    let node_a = request(Some(&a));
    assert!(access.node(&node_a, "node-a", "heartbeat").is_ok());
    assert_eq!(
        access.any_node(&node_a, "token").unwrap(),
        Caller::Node("node-a".into())
    );
    // node-b's token speaks for node-b only.
    let as_a = access
        .node(&request(Some(&b)), "node-a", "watch")
        .unwrap_err();
    assert_eq!(as_a.code(), tonic::Code::PermissionDenied);
    assert!(as_a.message().contains("node/node-b"), "{}", as_a.message());
    // SMS's own secret is not a node token, and no token is an admin.
    assert!(access
        .node(&request(Some(SECRET)), "node-a", "heartbeat")
        .is_err());
    assert!(access.admin(&node_a, "status").is_err());
}

#[test]
fn a_forged_node_token_is_refused_before_reading_and_never_shown() {
    let (access, a, _) = sms();
    let forged = a.replace("node-a", "node-c");
    let refused = access
        .admit(
            "/spear.v1.Nodes/Heartbeat",
            None,
            None,
            Some(forged.as_bytes()),
        )
        .unwrap_err();
    assert!(
        !refused.message().contains(&forged),
        "{}",
        refused.message()
    );
    assert!(access
        .admit("/spear.v1.Nodes/Heartbeat", None, None, Some(a.as_bytes()))
        .is_ok());
}

#[test]
fn on_a_nodes_plaintext_port_invocations_need_the_nodes_own_token() {
    let own = "spear-node~node-a~0123456789abcdef";
    let access = Access::new(false, AdminToken::none()).with_join_token(JoinToken::fixed(own));
    assert!(access.runner(&request(None)).is_err());
    assert!(access
        .runner(&request(Some("spear-node~node-b~guess")))
        .is_err());
    assert_eq!(access.runner(&request(Some(own))).unwrap(), Caller::Joined);
}

#[test]
fn without_a_join_token_a_loopback_plaintext_port_stays_open() {
    let access = Access::new(false, AdminToken::none());
    assert!(access.node(&request(None), "n1", "heartbeat").is_ok());
    assert!(access.reader(&request(None), "watch").is_ok());
}
