//! `audit` scenario of the MCP suite: what the audit trail costs.
//!
//! 1. A tool call with the audit log on against one with it off: two
//!    routers over the same server-everything process, called alternately
//!    in one run (in ABBA order, so neither always goes first). The "on"
//!    router is a run's (task, invocation, identity), so each call digests
//!    its arguments, looks up the tool's pin and appends its record, as on
//!    a node. A second "off" router in the same rotation shows the noise
//!    floor (two identical paths differ by this much). Then the audit's
//!    own work alone (digest and append), with no server in the way.
//! 2. The wait for the records to be on disk, paid once per model request
//!    (after each call here, so once per call: the worst case).
//! 3. Sustained records per second: 64 concurrent "runs", each appending a
//!    record and waiting for it to be on disk, for 5 s; the writer syncs
//!    what has arrived as one batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spear_proto::audit::{Kind, Outcome, Record};
use spearlet::connections::Connections;
use spearlet::tools::Router;
use spearlet::trust::audit::{AuditLog, ROTATE_BYTES};
use spearlet::trust::{NodeTrust, RunScope};

use super::{everything, percentile, policies, registry, spec, us};

pub async fn run() {
    const CALLS: usize = 5000;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log =
        AuditLog::open(dir.path(), "bench-node", ROTATE_BYTES).unwrap_or_else(|e| panic!("{e}"));
    let registry = registry(vec![spec("everything", &everything(), &["stdio"])]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    let off = Router::new(connections.clone(), registry.clone());
    let control = Router::new(connections.clone(), registry.clone());
    let on = Router::new(connections.clone(), registry)
        .with_trust(NodeTrust {
            node_id: "bench-node".into(),
            approvals: None,
            audit: Some(log.clone()),
            quotas: None,
            meters: Default::default(),
        })
        .for_run(RunScope {
            task_id: "bench".into(),
            invocation_id: "inv-bench".into(),
            identity: "sms".into(),
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
    let mut off_s = Vec::with_capacity(CALLS);
    let mut control_s = Vec::with_capacity(CALLS);
    let mut on_s = Vec::with_capacity(CALLS);
    let mut durable_s = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 200 {
        // Each arm first, second and third equally often.
        let mut took = [Duration::ZERO; 3];
        let routers = [&off, &control, &on];
        for step in 0..3 {
            let k = (i + step) % 3;
            let started = Instant::now();
            let outcome = routers[k].execute(&task, &session, &set, &echo, args).await;
            took[k] = started.elapsed();
            assert!(!outcome.is_error, "{}", outcome.text);
        }
        let [off_took, control_took, on_took] = took;
        if i >= 200 {
            off_s.push(off_took);
            control_s.push(control_took);
            on_s.push(on_took);
        }
    }
    // A model request's wait: one call, then its record on disk.
    for i in 0..CALLS / 5 + 50 {
        let outcome = on.execute(&task, &session, &set, &echo, args).await;
        assert!(!outcome.is_error, "{}", outcome.text);
        let started = Instant::now();
        on.trust().durable().await.unwrap_or_else(|e| panic!("{e}"));
        if i >= 50 {
            durable_s.push(started.elapsed());
        }
    }
    let (o50, o99) = (percentile(&mut off_s, 0.5), percentile(&mut off_s, 0.99));
    let (a50, a99) = (percentile(&mut on_s, 0.5), percentile(&mut on_s, 0.99));
    let c50 = percentile(&mut control_s, 0.5);
    let (d50, d99) = (
        percentile(&mut durable_s, 0.5),
        percentile(&mut durable_s, 0.99),
    );
    println!(
        "\n## audit trail, server-everything echo over stdio, {CALLS} calls each, alternating"
    );
    println!(
        "audit off (baseline): p50 {:.1} us, p99 {:.1} us",
        us(o50),
        us(o99)
    );
    println!(
        "audit on:             p50 {:.1} us, p99 {:.1} us",
        us(a50),
        us(a99)
    );
    println!("added at p50: {:.1} us", us(a50) - us(o50));
    println!(
        "noise floor: a second audit-off router differs from the first by {:.1} us at p50",
        us(c50) - us(o50)
    );
    println!(
        "wait for the record on disk (once per model request): p50 {:.1} us, p99 {:.1} us",
        us(d50),
        us(d99)
    );
    connections.shutdown().await;
    own_work(&log);
    sustained(&log).await;
}

/// The audit's work on a call alone: the arguments' digest and the append.
fn own_work(log: &AuditLog) {
    const N: usize = 20_000;
    let mut samples = Vec::with_capacity(N);
    for _ in 0..N {
        let started = Instant::now();
        let args = spear_proto::approvals::arguments_digest(r#"{"message": "benchmark"}"#)
            .unwrap_or_default();
        log.append(Record {
            kind: Kind::ToolCall,
            outcome: Outcome::Run,
            server: "everything".into(),
            tool: "echo".into(),
            args,
            ..Record::default()
        });
        samples.push(started.elapsed());
    }
    let (p50, p99) = (
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    );
    println!(
        "the audit's own work per call (arguments digest, append): p50 {:.2} us, p99 {:.2} us",
        us(p50),
        us(p99)
    );
}

/// Records per second with `RUNS` concurrent appenders, each waiting for
/// its record to be on disk before the next.
async fn sustained(log: &AuditLog) {
    const RUNS: usize = 64;
    const FOR: Duration = Duration::from_secs(5);
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let writers: Vec<_> = (0..RUNS)
        .map(|run| {
            let (log, done) = (log.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                while started.elapsed() < FOR {
                    let seq = log.append(Record {
                        kind: Kind::ToolCall,
                        outcome: Outcome::Run,
                        task: "bench".into(),
                        invocation: format!("inv-{run}"),
                        server: "everything".into(),
                        tool: "echo".into(),
                        rule: "allowed at every layer (no allow list, no deny pattern matches)"
                            .into(),
                        args: "6f1bcc59203e457e0b8895edd5b57503d3569d9ed29998884079bdbb12728ae5"
                            .into(),
                        duration_us: Some(120),
                        ..Record::default()
                    });
                    log.durable(seq).await.unwrap_or_else(|e| panic!("{e}"));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for writer in writers {
        let _ = writer.await;
    }
    let took = started.elapsed().as_secs_f64();
    let records = done.load(Ordering::Relaxed);
    println!(
        "sustained, {RUNS} runs each waiting for its record on disk: {records} records in {took:.1} s = {:.0} records/s",
        records as f64 / took
    );
}
