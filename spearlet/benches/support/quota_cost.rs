//! `quotas` scenario of the MCP suite: what a fleet quota costs a call.
//!
//! 1. A tool call of a task with a quota (its `tool_calls`, and the
//!    server's `calls`) against the same call with quotas off: routers
//!    over one server-everything process, called in rotation in one run
//!    (each arm first equally often), with a second "off" router showing
//!    the noise floor. The quotas are large, so no call is refused: this
//!    is the price of the check itself.
//! 2. The node's check alone (`NodeQuotas::take`, one unit from the
//!    slice), with no server in the way.
//!
//! SMS's side here is a counter in this process granting slices as SMS
//! does (`Want::Slice` caps them at 1,000 calls): a round trip is paid
//! once per slice, and its cost on a real fleet (etcd requests per 1,000
//! calls) is tests/tests/quotas_fleet.rs's figure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use spear_proto::quota::{OnUnreachable, TaskQuota};
use spear_proto::v1::{
    QuotaKey, QuotaMeter, Rate, ServerQuota, TakeQuotaRequest, TakeQuotaResponse,
};
use spearlet::connections::Connections;
use spearlet::quota::{NodeQuotas, TakeFailed, Taker};
use spearlet::tools::Router;
use spearlet::trust::{NodeTrust, RunScope};

use super::{everything, percentile, policies, registry, spec, us};

const MAX: u64 = 1_000_000_000;
const SLICE: u64 = 1_000;

/// Grants slices of 1,000 from one in-process counter per key.
#[derive(Default)]
struct InProcess {
    used: Mutex<std::collections::HashMap<String, u64>>,
}

#[async_trait]
impl Taker for InProcess {
    async fn take(&self, request: TakeQuotaRequest) -> Result<TakeQuotaResponse, TakeFailed> {
        let key = request.key.unwrap_or_default();
        let mut used = self.used.lock();
        let used = used.entry(format!("{}/{}", key.meter, key.id)).or_default();
        *used += request.spent;
        let granted = SLICE.min(MAX - *used);
        *used += granted;
        Ok(TakeQuotaResponse {
            granted,
            rate: Some(Rate {
                max: MAX,
                per_ms: 86_400_000,
            }),
            used: *used,
            refill_at_ms: spear_common::clock::now_ms() + 86_400_000,
            unlimited: false,
            slice_until_ms: 0,
        })
    }
}

pub async fn run() {
    const CALLS: usize = 5000;
    let mut server = spec("everything", &everything(), &["stdio"]);
    server.quota = Some(ServerQuota {
        calls: Some(Rate {
            max: MAX,
            per_ms: 86_400_000,
        }),
        ..ServerQuota::default()
    });
    let registry = registry(vec![server]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let quotas = NodeQuotas::new("bench-node", Arc::new(InProcess::default()));
    let off = Router::new(connections.clone(), registry.clone());
    let control = Router::new(connections.clone(), registry.clone());
    let task_quota: TaskQuota = serde_json::from_str(&format!(
        r#"{{"tool_calls": {{"max": {MAX}, "per": "1d"}}}}"#
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let on = Router::new(connections.clone(), registry)
        .with_trust(NodeTrust {
            node_id: "bench-node".into(),
            approvals: None,
            audit: None,
            quotas: Some(quotas.clone()),
            meters: Default::default(),
        })
        .for_run(RunScope {
            task_id: "bench".into(),
            invocation_id: "inv-bench".into(),
            quota: Some(task_quota),
            ..Default::default()
        });
    let ids = ["everything".to_string()];
    let (task, session) = policies(&ids);
    let set = off.tool_set(&task, &session).await;
    let echo = set
        .tools
        .iter()
        .find(|t| t.tool == "echo")
        .map(|t| t.name.clone())
        .unwrap_or_else(|| panic!("no echo"));
    let args = r#"{"message": "benchmark"}"#;
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for i in 0..CALLS + 200 {
        let routers = [&off, &control, &on];
        for step in 0..3 {
            let k = (i + step) % 3;
            let started = Instant::now();
            let outcome = routers[k].execute(&task, &session, &set, &echo, args).await;
            let took = started.elapsed();
            assert!(!outcome.is_error, "{}", outcome.text);
            if i >= 200 {
                samples[k].push(took);
            }
        }
    }
    let [off_s, control_s, on_s] = &mut samples;
    let (o50, o99) = (percentile(off_s, 0.5), percentile(off_s, 0.99));
    let (q50, q99) = (percentile(on_s, 0.5), percentile(on_s, 0.99));
    let c50 = percentile(control_s, 0.5);
    println!(
        "\n## fleet quotas, server-everything echo over stdio, {CALLS} calls each, in rotation"
    );
    println!(
        "quotas off (baseline): p50 {:.1} us, p99 {:.1} us",
        us(o50),
        us(o99)
    );
    println!(
        "task and server quota: p50 {:.1} us, p99 {:.1} us",
        us(q50),
        us(q99)
    );
    println!("added at p50: {:.1} us", us(q50) - us(o50));
    println!(
        "noise floor: a second quotas-off router differs from the first by {:.1} us at p50",
        us(c50) - us(o50)
    );
    connections.shutdown().await;
    own_work(&quotas).await;
}

/// The node's check alone: one unit from the slice.
async fn own_work(quotas: &NodeQuotas) {
    const N: usize = 100_000;
    let key = QuotaKey {
        meter: QuotaMeter::TaskToolCalls as i32,
        id: "own-work".into(),
        ..QuotaKey::default()
    };
    let mut samples = Vec::with_capacity(N);
    for _ in 0..N {
        let started = Instant::now();
        let taken = quotas
            .take(&key, OnUnreachable::Refuse, true, &bytes::Bytes::new())
            .await;
        samples.push(started.elapsed());
        assert!(taken.is_ok());
    }
    println!(
        "the check alone ({N} calls, a round trip per {SLICE}): p50 {:.2} us, p99 {:.2} us",
        us(percentile(&mut samples, 0.5)),
        us(percentile(&mut samples, 0.99))
    );
}
