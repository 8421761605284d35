//! `pins` scenario of the MCP suite: what checking a tool's pin costs a
//! call. Two server-everything processes behind one node path, one with
//! `"pin": "off"` and one pinned to exactly what it lists (every call
//! checks the tool against the pin), called alternately in one run.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use spear_proto::v1::ToolPins;
use spearlet::connections::{pins, Connections};
use spearlet::registry::RegistryView;
use spearlet::tools::Router;

use super::{everything, percentile, policies, registry, spec, us};

pub async fn run() {
    const CALLS: usize = 2000;
    let mut off = spec("unpinned", &everything(), &["stdio"]);
    off.pin = "off".into();
    let pinned = spec("pinned", &everything(), &["stdio"]);
    let registry = registry(vec![off, pinned]);
    let connections = Connections::new(registry.clone(), Arc::new(|_: &str| Ok(None)));
    // Pin "pinned" to what it lists, as SMS would on first sight.
    let catalog = connections
        .catalog("pinned")
        .await
        .unwrap_or_else(|e| panic!("list pinned: {e}"));
    let tools = catalog
        .tools
        .iter()
        .map(|t| {
            let seen = pins::seen(t);
            (seen.name, seen.digest)
        })
        .collect();
    let mut view = RegistryView::clone(&registry.current());
    if let Some(record) = view.servers.get_mut("pinned") {
        Arc::make_mut(record).pins = Some(ToolPins { tools });
    }
    registry.publish(Arc::new(view), BTreeSet::from(["pinned".to_string()]));

    let router = Router::new(connections.clone(), registry);
    let ids = ["unpinned".to_string(), "pinned".to_string()];
    let (task, session) = policies(&ids);
    let set = router.tool_set(&task, &session).await;
    let echo = |server: &str| {
        set.tools
            .iter()
            .find(|t| t.tool == "echo" && t.server_id == server)
            .map(|t| t.name.clone())
            .unwrap_or_else(|| panic!("{server} offers no echo"))
    };
    let (off_echo, pinned_echo) = (echo("unpinned"), echo("pinned"));
    let mut samples = [Vec::with_capacity(CALLS), Vec::with_capacity(CALLS)];
    for i in 0..CALLS + 200 {
        for (k, name) in [&off_echo, &pinned_echo].into_iter().enumerate() {
            let started = Instant::now();
            let outcome = router
                .execute(&task, &session, &set, name, r#"{"message": "benchmark"}"#)
                .await;
            let took = started.elapsed();
            assert!(!outcome.is_error, "{}", outcome.text);
            if i >= 200 {
                samples[k].push(took);
            }
        }
    }
    let [mut off_s, mut pinned_s] = samples;
    let (o50, o99) = (percentile(&mut off_s, 0.5), percentile(&mut off_s, 0.99));
    let (p50, p99) = (
        percentile(&mut pinned_s, 0.5),
        percentile(&mut pinned_s, 0.99),
    );
    println!(
        "\n## pin checking, server-everything echo over stdio, {CALLS} calls each, alternating"
    );
    println!(
        "pin off (baseline): p50 {:.1} us, p99 {:.1} us",
        us(o50),
        us(o99)
    );
    println!(
        "pinned, checked:    p50 {:.1} us, p99 {:.1} us",
        us(p50),
        us(p99)
    );
    println!("added at p50: {:.1} us", us(p50) - us(o50));
    connections.shutdown().await;
}
