//! A task invoked through SMS with the real `sms invoke --json`, as an operator runs it, and
//! how long the caller waited.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::procs::bin;

/// Invokes `id` through SMS; returns the exit code, the JSON run (or
/// null), stderr and how long the caller waited.
pub fn invoke(sms_grpc: &str, id: &str) -> (Option<i32>, Value, String, Duration) {
    let started = Instant::now();
    let out = Command::new(bin("sms"))
        .args(["invoke", "--json", id, "--addr", sms_grpc])
        .env_remove("SMS_ADMIN_TOKEN")
        .output()
        .unwrap();
    let run = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code(), run, err, started.elapsed())
}
