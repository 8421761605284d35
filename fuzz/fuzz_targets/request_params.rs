//! The session's request params: any key and any JSON value from a guest
//! either applies or is refused without changing the params, never panics,
//! and never leaves a loop limit wider than the run's or a value outside
//! the range every provider accepts.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use spear_guest::request::{Param, RequestParams};
use spearlet::cchat::request_params::{set, Ceilings};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (key, value) = text.split_once('=').unwrap_or((&text, "null"));
    let (Some(param), Ok(value)) = (Param::from_key(key), serde_json::from_str(value)) else {
        return;
    };
    let ceilings = Ceilings {
        max_iterations: 8,
        max_total_tool_calls: 32,
        wall: Duration::from_secs(60),
    };
    let mut params = RequestParams::new().temperature(1.0).max_iterations(4);
    let before = params.clone();
    match set(&mut params, param, &value, &ceilings) {
        Ok(()) => {
            assert!(params.max_iterations.is_none_or(|n| (1..=8).contains(&n)));
            assert!(params.max_total_tool_calls.is_none_or(|n| n <= 32));
            assert!(params.timeout_ms.is_none_or(|ms| (1..=60_000).contains(&ms)));
            assert!(params.temperature.is_none_or(|t| (0.0..=2.0).contains(&t)));
            assert!(params.top_p.is_none_or(|p| p > 0.0 && p <= 1.0));
            assert!(params.stop.as_ref().is_none_or(|s| (1..=4).contains(&s.len())));
        }
        Err(_) => assert_eq!(params, before, "a refused write changed the params"),
    }
});
