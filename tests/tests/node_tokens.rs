//! One credential per node on a plaintext plane (issue 38, item 3), tried
//! as a holder of another node's credential would, on the real binaries:
//! a join token works once and for its own node id only; a node token
//! speaks for its node and nobody else (heartbeat, watch, audit shipping,
//! sealed values); SMS's own secret is no node's; a revoked node's token
//! stops working; a tail a node reported and never shipped is named. Real
//! nodes joining are in node_tokens_real.rs.

use std::time::Duration;

use spear_proto::v1::approvals_client::ApprovalsClient;
use spear_proto::v1::audit_client::AuditClient;
use spear_proto::v1::credentials_client::CredentialsClient;
use spear_proto::v1::nodes_client::NodesClient;
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::{
    ApprovalBinding, AuditLine, HeartbeatRequest, JoinRequest, ListServersRequest,
    OpenSealedRequest, RequestApprovalRequest, SealedValue, ShipAuditRequest, WatchRequest,
};
use spear_tests::node_join::{join_token, sms, SEALED, SECRET, TOKEN};
use spear_tests::runtime;
use spear_tests::wait::eventually;
use tonic::transport::{Channel, Endpoint};

async fn channel(addr: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap_or_else(|e| panic!("{e}"))
        .connect()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn presenting<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        spear_identity::JOIN_TOKEN_HEADER,
        token.parse().unwrap_or_else(|e| panic!("{e:?}")),
    );
    request
}

async fn join(sms: &str, node: &str, token: &str) -> Result<String, tonic::Status> {
    NodesClient::new(channel(sms).await)
        .join(JoinRequest {
            node_id: node.into(),
            join_token: token.into(),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().node_token)
}

/// What a holder of `token` gets when it speaks as `node`: heartbeat,
/// watch and audit shipping.
async fn as_node(sms: &str, node: &str, token: &str) -> Vec<(&'static str, tonic::Status)> {
    let channel = channel(sms).await;
    let mut got = Vec::new();
    let heartbeat = NodesClient::new(channel.clone())
        .heartbeat(presenting(
            HeartbeatRequest {
                node_id: node.into(),
                ..Default::default()
            },
            token,
        ))
        .await;
    got.push((
        "heartbeat",
        heartbeat.err().unwrap_or_else(|| tonic::Status::ok("")),
    ));
    let watch = match RegistryClient::new(channel.clone())
        .watch(presenting(
            WatchRequest {
                node_id: node.into(),
                ..Default::default()
            },
            token,
        ))
        .await
    {
        Ok(mut stream) => match stream.get_mut().message().await {
            Ok(_) => tonic::Status::ok(""),
            Err(status) => status,
        },
        Err(status) => status,
    };
    got.push(("watch", watch));
    let shipped = AuditClient::new(channel)
        .ship_audit(presenting(
            ShipAuditRequest {
                node_id: node.into(),
                records: vec![AuditLine {
                    seq: 1,
                    json: "{}".into(),
                }],
            },
            token,
        ))
        .await;
    got.push((
        "ship audit",
        shipped.err().unwrap_or_else(|| tonic::Status::ok("")),
    ));
    got
}

/// Asks an approval for a call on `node`, presenting `token`.
async fn ask_approval(sms: &str, node: &str, token: &str) -> Result<String, tonic::Status> {
    let binding = ApprovalBinding {
        node_id: node.into(),
        task_id: "t".into(),
        invocation_id: "inv-1".into(),
        server_id: "vault".into(),
        tool: "write".into(),
        arguments_digest: spear_proto::approvals::arguments_digest("{}").unwrap_or_default(),
        ..Default::default()
    };
    ApprovalsClient::new(channel(sms).await)
        .request_approval(presenting(
            RequestApprovalRequest {
                binding: Some(binding),
                arguments: "{}".into(),
                expires_in_ms: 60_000,
            },
            token,
        ))
        .await
        .map(|r| r.into_inner().approval_id)
}

async fn sealed_of_vault(sms: &str, token: &str) -> Vec<SealedValue> {
    RegistryClient::new(channel(sms).await)
        .list_servers(presenting(ListServersRequest {}, token))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .into_inner()
        .servers
        .into_iter()
        .filter_map(|r| r.spec)
        .find(|s| s.id == "vault")
        .map(|s| s.sealed)
        .unwrap_or_default()
}

async fn open(
    sms: &str,
    token: &str,
    values: Vec<SealedValue>,
) -> Result<Vec<String>, tonic::Status> {
    CredentialsClient::new(channel(sms).await)
        .open_sealed(presenting(
            OpenSealedRequest {
                server_id: "vault".into(),
                values,
            },
            token,
        ))
        .await
        .map(|r| r.into_inner().values)
}

#[test]
fn a_join_token_works_once_for_its_node_and_a_node_token_only_for_its_node() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let sms = sms(dir.path());
    let rt = runtime();
    let for_a = join_token(&sms, "node-a");

    // node-a's join token, presented by node-b, or stretched: refused.
    let other = rt.block_on(join(&sms.grpc, "node-b", &for_a)).unwrap_err();
    assert_eq!(other.code(), tonic::Code::PermissionDenied, "{other:?}");
    assert!(
        other.message().contains("made for node 'node-a'"),
        "{}",
        other.message()
    );
    let parts: Vec<&str> = for_a.split('~').collect();
    let stretched = for_a.replace(
        parts[2],
        &(parts[2].parse::<u64>().unwrap_or(0) + 86_400).to_string(),
    );
    let forged = rt
        .block_on(join(&sms.grpc, "node-a", &stretched))
        .unwrap_err();
    assert_eq!(forged.code(), tonic::Code::Unauthenticated, "{forged:?}");

    // Used once; the second use is refused and names why.
    let token_a = rt
        .block_on(join(&sms.grpc, "node-a", &for_a))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let twice = rt.block_on(join(&sms.grpc, "node-a", &for_a)).unwrap_err();
    assert_eq!(twice.code(), tonic::Code::Unauthenticated, "{twice:?}");
    assert!(
        twice.message().contains("already used"),
        "{}",
        twice.message()
    );
    assert!(!twice.message().contains(&for_a), "{}", twice.message());
    let token_b = rt
        .block_on(join(&sms.grpc, "node-b", &join_token(&sms, "node-b")))
        .unwrap_or_else(|e| panic!("{e:?}"));

    // node-b's token speaks for node-b only: nothing as node-a.
    for (what, status) in rt.block_on(as_node(&sms.grpc, "node-a", &token_b)) {
        assert_eq!(
            status.code(),
            tonic::Code::PermissionDenied,
            "{what}: {status:?}"
        );
        assert!(
            status.message().contains("node/node-b"),
            "{what}: {}",
            status.message()
        );
    }
    // SMS's own secret is no node's token; neither is a made-up one.
    for presented in [
        SECRET,
        "spear-node~node-a~AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    ] {
        for (what, status) in rt.block_on(as_node(&sms.grpc, "node-a", presented)) {
            assert_eq!(
                status.code(),
                tonic::Code::Unauthenticated,
                "{what}: {status:?}"
            );
        }
    }
    // node-a heartbeats as itself.
    let own = rt.block_on(as_node(&sms.grpc, "node-a", &token_a));
    assert_eq!(
        own[0].1.code(),
        tonic::Code::Ok,
        "heartbeat: {:?}",
        own[0].1
    );
    // Approvals are asked by live nodes only: node-b, joined but never
    // heard from, is refused; node-a, which just heartbeated, is not.
    let ghost = rt
        .block_on(ask_approval(&sms.grpc, "node-b", &token_b))
        .unwrap_err();
    assert_eq!(ghost.code(), tonic::Code::FailedPrecondition, "{ghost:?}");
    assert!(
        ghost.message().contains("has not heartbeated"),
        "{}",
        ghost.message()
    );
    rt.block_on(ask_approval(&sms.grpc, "node-a", &token_a))
        .unwrap_or_else(|e| panic!("{e:?}"));

    // node-a's sealed value opens for node-a, not for node-b.
    let sealed = rt.block_on(sealed_of_vault(&sms.grpc, &token_a));
    assert_eq!(sealed.len(), 1, "the vault's literal is sealed");
    let refused = rt
        .block_on(open(&sms.grpc, &token_b, sealed.clone()))
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(!refused.message().contains(SEALED));
    let opened = rt
        .block_on(open(&sms.grpc, &token_a, sealed))
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(opened, vec![SEALED.to_string()]);

    // Who made which join token is in SMS's own chain; the tokens are not.
    let (code, trail, err) =
        sms.client_with_token(&["audit", "--json", "--node", "sms"], Some(TOKEN));
    assert_eq!(code, 0, "{err}");
    assert!(
        trail.contains("\"action\":\"mint_join_token\",\"target\":\"node-a\""),
        "{trail}"
    );
    assert!(!trail.contains(&for_a), "a join token in the audit trail");
    // A revoked node's token stops working.
    let (code, _, err) =
        sms.client_with_token(&["certs", "revoke", "--node", "node-a"], Some(TOKEN));
    assert_eq!(code, 0, "{err}");
    eventually(
        "node-a's token to be refused",
        Duration::from_secs(10),
        || {
            let got = rt.block_on(as_node(&sms.grpc, "node-a", &token_a));
            (got[0].1.code() == tonic::Code::Unauthenticated)
                .then_some(())
                .ok_or(format!("{:?}", got[0].1))
        },
    );
}

/// Ships `count` records of `node`'s chain from seq 1, sealed as a node
/// seals them.
async fn ship_chain(sms: &str, node: &str, token: &str, count: u64) {
    let mut prev = String::new();
    let mut records = Vec::new();
    for seq in 1..=count {
        // Written now: older records than the retention are retired.
        let time_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut record = spear_proto::audit::Record {
            node: node.into(),
            tool: "echo".into(),
            time_ms,
            ..Default::default()
        };
        let json = record.seal(seq, &prev);
        prev = record.hash.clone();
        records.push(AuditLine { seq, json });
    }
    AuditClient::new(channel(sms).await)
        .ship_audit(presenting(
            ShipAuditRequest {
                node_id: node.into(),
                records,
            },
            token,
        ))
        .await
        .map(|r| assert_eq!(r.into_inner().stored, count, "every record kept"))
        .unwrap_or_else(|e| panic!("{e:?}"));
}

/// A cut tail, on the real SMS: a node reports in its heartbeat that its
/// chain reached seq 5, and only 1 and 2 ever arrive (its log was cut
/// before they were shipped). Once the grace for records on their way is
/// over, `sms audit verify` names the missing ones and exits 1.
#[test]
fn a_tail_a_node_reported_and_never_shipped_is_named() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let sms = sms(dir.path());
    let rt = runtime();
    let token = rt
        .block_on(join(&sms.grpc, "node-a", &join_token(&sms, "node-a")))
        .unwrap_or_else(|e| panic!("{e:?}"));
    rt.block_on(async {
        NodesClient::new(channel(&sms.grpc).await)
            .heartbeat(presenting(
                HeartbeatRequest {
                    node_id: "node-a".into(),
                    audit_head_seq: 5,
                    ..Default::default()
                },
                &token,
            ))
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        ship_chain(&sms.grpc, "node-a", &token, 2).await;
    });
    let (code, out, err) = sms.client_with_token(&["audit", "verify"], Some(TOKEN));
    assert_eq!(
        code, 0,
        "records on their way are not named yet: {out}{err}"
    );
    let named = eventually("the cut tail named", Duration::from_secs(60), || {
        let (code, out, err) = sms.client_with_token(&["audit", "verify"], Some(TOKEN));
        (code == 1 && out.contains("records 3 to 5 never reached SMS"))
            .then_some(out.clone())
            .ok_or(format!("{code}: {out}{err}"))
    });
    assert!(named.contains("node-a"), "{named}");
}
