//! A node with its own valid credentials attacks the fleet's quotas (issue
//! 54): it takes slice after slice and never says it used them, says it
//! spent 2^63-1 tokens, and makes up principals. On the real binaries over
//! mutual TLS: the honest node's runs are still served, SMS counts no more
//! of the rogue's than one slice and what it was granted, refuses made-up
//! principals past a few with one sentence, and `/metrics` says why.

use std::time::Duration;

use serde_json::{json, Value};
use spear_identity::{dial, Identity};
use spear_proto::v1::quotas_client::QuotasClient;
use spear_proto::v1::{QuotaKey, QuotaMeter, TakeQuotaRequest, TakeQuotaResponse};
use spear_tests::certs::Certs;
use spear_tests::tasks::{calling_once, cluster_opts, guest, register, Cluster, ClusterOptions};
use spear_tests::wait::eventually;

use spear_tests::tasks::{quota_task as task, PRICED_MODEL as PRICES};

fn invoke(c: &Cluster, task: &str) -> Value {
    let (_, out, err) = c
        .sms
        .client(&["invoke", "--json", "--node", "node-a", task]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"))
}

/// The rogue: a node of the plane with its own certificate.
struct Rogue {
    client: QuotasClient<tonic::transport::Channel>,
}

impl Rogue {
    async fn connect(certs: &Certs, sms: &str) -> Rogue {
        let tls = certs.node("rogue").identity().unwrap();
        let (endpoint, dialer) = dial(sms, Some(&tls), Identity::Sms).unwrap();
        let channel = dialer.connect(endpoint).await.unwrap();
        Rogue {
            client: QuotasClient::new(channel),
        }
    }

    async fn take(
        &mut self,
        key: QuotaKey,
        spent: u64,
    ) -> Result<TakeQuotaResponse, tonic::Status> {
        self.client
            .take_quota(TakeQuotaRequest {
                node_id: "rogue".into(),
                key: Some(key),
                spent,
                ..TakeQuotaRequest::default()
            })
            .await
            .map(tonic::Response::into_inner)
    }
}

fn key(meter: QuotaMeter, task: &str, principal: &str) -> QuotaKey {
    QuotaKey {
        meter: meter as i32,
        id: task.into(),
        principal: principal.into(),
        ..QuotaKey::default()
    }
}

fn refusals(c: &Cluster, reason: &str) -> f64 {
    let text = spear_tests::http::get(&c.sms.metrics, "/metrics").unwrap();
    let line = format!("sms_quota_refusals_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line} in:\n{text}"))
}

#[test]
fn a_rogue_node_cannot_drain_a_fleet_quota_or_report_absurd_usage() {
    let certs = Certs::new("spear.test");
    let dir = tempfile::tempdir().unwrap();
    let model = calling_once(dir.path(), "fs", "list_allowed_directories");
    let c = cluster_opts(
        "quota'd notes",
        ClusterOptions {
            certs: Some(&certs),
            node_toml: PRICES,
            models: vec![("once", model)],
            ..Default::default()
        },
    );
    let calls = task(json!({"tool_calls": {"max": 50, "per": "1h"},
                            "model_tokens": {"max": 100000, "per": "1h"}}));
    let (code, _, err) = register(&c, "shared", &guest("fs-agent"), &calls, &[]);
    assert_eq!(code, 0, "{err}");
    let people = task(json!({"tool_calls": {"max": 50, "per": "1h"}, "per_principal": true}));
    let (code, _, err) = register(&c, "people", &guest("fs-agent"), &people, &[]);
    assert_eq!(code, 0, "{err}");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut rogue = runtime.block_on(Rogue::connect(&certs, &c.sms.grpc));
    runtime.block_on(async {
        // Slice after slice, never saying any was used: on an SMS that
        // trusted this, 33 takes ended the window for every node.
        let mut last = TakeQuotaResponse::default();
        for _ in 0..200 {
            last = rogue
                .take(key(QuotaMeter::TaskToolCalls, "shared", ""), 0)
                .await
                .unwrap();
        }
        assert!(last.granted >= 1, "{last:?}");
        assert_eq!(last.used, last.granted, "only the rogue's last slice is counted: {last:?}");
        // 2^63-1 tokens "spent": counted up to half the limit past what
        // the rogue was granted in the window.
        let absurd = rogue
            .take(key(QuotaMeter::TaskModelTokens, "shared", ""), i64::MAX as u64)
            .await
            .unwrap();
        assert!(absurd.used <= 50_000 + 5_000, "{absurd:?}");
        // Made-up principals: a few, then one sentence.
        let mut refused = None;
        for i in 0..200 {
            match rogue
                .take(key(QuotaMeter::TaskToolCalls, "people", &format!("made-up-{i}")), 0)
                .await
            {
                Ok(_) => {}
                Err(status) => {
                    refused = Some((i, status));
                    break;
                }
            }
        }
        let (at, status) = refused.expect("200 made-up principals were all counted");
        assert_eq!(at, 32, "{status:?}");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(
            status
                .message()
                .contains("node 'rogue' named more than 32 principals of task 'people' in this window that SMS sent it no run for"),
            "{status:?}"
        );
    });

    // The honest node is served: its run's one call and model request.
    let run = invoke(&c, "shared");
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(run["usage"]["tool_calls"], 1, "{run}");
    assert_ne!(run["stop_reason"], "quota", "{run}");
    assert!(refusals(&c, "spent_past_grant") >= 1.0);
    assert!(refusals(&c, "principals") >= 1.0);

    // The rogue cannot ask in another's name either.
    let as_other = runtime.block_on(async {
        rogue
            .client
            .take_quota(TakeQuotaRequest {
                node_id: "node-a".into(),
                key: Some(key(QuotaMeter::TaskToolCalls, "shared", "")),
                ..TakeQuotaRequest::default()
            })
            .await
    });
    assert_eq!(as_other.unwrap_err().code(), tonic::Code::PermissionDenied);
    // And SMS still serves everyone after the attack.
    eventually("SMS to answer status", Duration::from_secs(10), || {
        c.sms.status()["nodes"][0]["alive"]
            .as_bool()
            .filter(|alive| *alive)
            .ok_or_else(|| "node-a not alive".to_string())
    });
}
