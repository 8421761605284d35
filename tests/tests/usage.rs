//! Usage and cost: a node prices each model request with its
//! `[llm.prices]` table; each run's reply says what it used and cost; `sms
//! usage` totals the same records the nodes shipped, so for a scripted set
//! of runs with known token counts the sum of the runs' costs is exactly
//! its total, a task filter counts only that task's runs, and a bad price
//! stops the node with one sentence.

use std::time::Duration;

use serde_json::Value;
use spear_tests::audit_trail::audit;
use spear_tests::procs::bin;
use spear_tests::tasks::{cluster_opts, fs_task, guest, register, ClusterOptions};
use spear_tests::wait::eventually;

/// The replay model's tokens per request (tests/scripted-model).
const INPUT_TOKENS: u64 = spear_scripted_model::PROMPT_TOKENS;
const OUTPUT_TOKENS: u64 = spear_scripted_model::COMPLETION_TOKENS;
/// `[llm.prices."recorded"]`: $3 and $15 per million tokens, that is 3,000
/// and 15,000 nano-dollars a token.
const PRICES: &str = "[llm.prices.\"recorded\"]\ninput = 3.0\noutput = 15.0\n";

fn usage(c: &spear_tests::tasks::Cluster, filters: &[&str]) -> Value {
    let mut args = vec!["usage", "--json"];
    args.extend_from_slice(filters);
    let (code, out, err) = c.sms.client(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn the_runs_costs_add_up_to_what_sms_usage_says() {
    let c = cluster_opts(
        "the notes that cost",
        ClusterOptions {
            node_toml: PRICES,
            ..Default::default()
        },
    );
    for task in ["notes", "other"] {
        let (code, _, err) = register(&c, task, &guest("fs-agent"), &fs_task(), &[]);
        assert_eq!(code, 0, "{err}");
    }
    let mut runs = Vec::new();
    for task in ["notes", "notes", "notes", "other"] {
        let (code, out, err) = c.sms.client(&["invoke", "--json", task]);
        assert_eq!(code, 0, "{out}{err}");
        let run: Value = serde_json::from_str(&out).unwrap();
        runs.push((task, run));
    }
    let mut expected = (0u64, 0u64, 0u64, 0u64, 0u64);
    for (task, run) in &runs {
        let used = &run["usage"];
        let requests = used["model_requests"].as_u64().unwrap();
        assert!(requests > 0, "{run}");
        // Each request: its tokens at the model's prices, exactly.
        assert_eq!(used["input_tokens"], requests * INPUT_TOKENS, "{run}");
        assert_eq!(used["output_tokens"], requests * OUTPUT_TOKENS, "{run}");
        let cost = requests * (INPUT_TOKENS * 3_000 + OUTPUT_TOKENS * 15_000);
        assert_eq!(used["cost_nano_usd"], cost, "{run}");
        assert_eq!(
            used["tool_calls"].as_u64().unwrap(),
            run["trace"].as_array().unwrap().len() as u64,
            "{run}"
        );
        if *task == "notes" {
            expected.0 += requests;
            expected.1 += used["input_tokens"].as_u64().unwrap();
            expected.2 += used["output_tokens"].as_u64().unwrap();
            expected.3 += used["tool_calls"].as_u64().unwrap();
            expected.4 += cost;
        }
    }
    // SMS totals the records the node shipped: the same numbers.
    let notes = eventually("the runs' records at SMS", Duration::from_secs(20), || {
        let notes = usage(&c, &["--task", "notes"]);
        (notes["model_requests"] == expected.0 && notes["tool_calls"] == expected.3)
            .then_some(notes.clone())
            .ok_or(notes.to_string())
    });
    assert_eq!(notes["runs"], 3, "{notes}");
    assert_eq!(notes["input_tokens"], expected.1, "{notes}");
    assert_eq!(notes["output_tokens"], expected.2, "{notes}");
    assert_eq!(notes["cost_nano_usd"], expected.4, "{notes}");
    assert_eq!(notes["unpriced_model_requests"], 0, "{notes}");
    // Everything: the other task's run too (its records ship after
    // `sms invoke` returns, like every run's, so wait for them).
    eventually(
        "the other run's records at SMS",
        Duration::from_secs(20),
        || {
            let all = usage(&c, &[]);
            (all["runs"] == 4).then_some(()).ok_or(all.to_string())
        },
    );
    // By principal, as the records name it: the caller of all four; nobody
    // else's are any.
    let records = audit(&c, &["--task", "notes"]);
    let caller = records[0]["principal"].as_str().unwrap().to_string();
    assert_eq!(usage(&c, &["--principal", &caller])["runs"], 4);
    assert_eq!(usage(&c, &["--principal", "https://idp#nobody"])["runs"], 0);

    // The node's metrics say the same, by task, principal and model.
    let metrics = spear_tests::http::get(&c.node.http, "/metrics").unwrap();
    let value = |name: &str| -> u64 {
        let prefix = format!("{name}{{task=\"notes\",principal=\"{caller}\",model=\"recorded\"");
        metrics
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    assert_eq!(
        value("spearlet_model_cost_nano_usd_total"),
        expected.4,
        "{metrics}"
    );
    assert_eq!(
        value("spearlet_model_requests_total"),
        expected.0,
        "{metrics}"
    );
    assert_eq!(
        value("spearlet_model_tokens_total"),
        expected.1 + expected.2,
        "{metrics}"
    );

    // The table as people read it.
    let (code, out, _) = c.sms.client(&["usage", "--task", "notes"]);
    assert_eq!(code, 0);
    assert!(out.contains("runs            3"), "{out}");
    assert!(
        out.contains(&format!("cost            ${:.6}", expected.4 as f64 / 1e9)),
        "{out}"
    );
}

#[test]
fn the_console_charts_what_sms_usage_totals() {
    let c = cluster_opts(
        "the notes on a chart",
        ClusterOptions {
            node_toml: PRICES,
            console: true,
            ..Default::default()
        },
    );
    let (code, _, err) = register(&c, "notes", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let mut requests = 0;
    for _ in 0..3 {
        let (code, out, err) = c.sms.client(&["invoke", "--json", "notes"]);
        assert_eq!(code, 0, "{out}{err}");
        let run: Value = serde_json::from_str(&out).unwrap();
        requests += run["usage"]["model_requests"].as_u64().unwrap();
    }
    // Every record of the three runs has reached SMS.
    let totals = eventually("the runs' records at SMS", Duration::from_secs(20), || {
        let totals = usage(&c, &["--task", "notes"]);
        (totals["runs"] == 3 && totals["model_requests"] == requests)
            .then_some(totals.clone())
            .ok_or(totals.to_string())
    });
    let seen = spear_tests::console::drive("usage", &c.sms, &[("TASK", "notes".into())]);
    assert_eq!(seen["nav"], 1, "{seen}");
    let shown = &seen["totals"];
    for key in [
        "runs",
        "model_requests",
        "input_tokens",
        "output_tokens",
        "tool_calls",
        "cost_nano_usd",
    ] {
        assert_eq!(
            shown[key],
            totals[key].to_string(),
            "{key}: {seen} against {totals}"
        );
    }
    // The chart's bars add up to the total: the three runs' hour (or two,
    // when an hour turned during the runs).
    let bars = seen["bars"].as_array().unwrap();
    assert!((1..=2).contains(&bars.len()), "{seen}");
    let cost: u64 = bars.iter().map(|b| b["cost"].as_u64().unwrap()).sum();
    let runs: u64 = bars.iter().map(|b| b["runs"].as_u64().unwrap()).sum();
    assert_eq!(cost, totals["cost_nano_usd"].as_u64().unwrap(), "{seen}");
    assert!(runs >= 3, "{seen}");
    let now_hour = spear_common::clock::now_ms() / 3_600_000 * 3_600_000;
    assert!(
        bars.iter()
            .any(|b| b["start"].as_u64().unwrap() + 3_600_000 >= now_hour),
        "{seen}"
    );
    assert!(
        bars.iter().all(|b| b["height"].as_f64().unwrap() >= 1.0),
        "{seen}"
    );
}

#[test]
fn a_bad_price_stops_the_node_with_the_entry_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("node.toml");
    std::fs::write(
        &config,
        "[llm.backends.m]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n\n[llm.prices.\"m\"]\ninput = -1.0\noutput = 1.0\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin("spearlet"))
        .args(["run", "--sms", "127.0.0.1:1", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[llm.prices.\"m\"] input = -1: a price is USD per million tokens"),
        "{err}"
    );
}
