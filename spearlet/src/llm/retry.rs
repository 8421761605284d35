//! One POST to a provider with retries on 429 and 5xx, honouring
//! `Retry-After`; every backend uses it.

use std::time::Duration;

use serde_json::Value;
use tracing::warn;

use super::types::LlmError;
use crate::http_client::describe;

/// Posts the request built by `request` (fresh for each attempt) and returns
/// the first successful response, retrying busy or failing providers
/// `max_retries` times.
pub async fn send(
    request: impl Fn() -> reqwest::RequestBuilder,
    timeout: Duration,
    max_retries: u32,
) -> Result<reqwest::Response, LlmError> {
    let mut attempt = 0;
    loop {
        let mut builder = request().timeout(timeout);
        // The model request's span, so the provider can join the trace.
        if let Some(traceparent) = spear_common::telemetry::traceparent() {
            builder = builder.header("traceparent", traceparent);
        }
        let response = match builder.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return Err(LlmError::Timeout(timeout)),
            Err(e) => return Err(LlmError::Unreachable(describe(e))),
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|s| Duration::from_secs_f64(s.clamp(0.0, 60.0)));
        if status.is_success() {
            return Ok(response);
        }
        let text = response
            .text()
            .await
            .map_err(|e| LlmError::BadReply(describe(e)))?;
        let retryable = status.as_u16() == 429 || status.is_server_error();
        if !retryable || attempt >= max_retries {
            return Err(LlmError::Provider {
                status: status.as_u16(),
                message: provider_message(&text),
            });
        }
        let delay =
            retry_after.unwrap_or_else(|| Duration::from_millis(250 * 2u64.pow(attempt.min(8))));
        warn!(
            status = status.as_u16(),
            attempt,
            ?delay,
            "model provider busy or failing; retrying"
        );
        tokio::time::sleep(delay).await;
        attempt += 1;
    }
}

/// The JSON body of a successful response.
pub async fn json(response: reqwest::Response) -> Result<Value, LlmError> {
    let text = response
        .text()
        .await
        .map_err(|e| LlmError::BadReply(describe(e)))?;
    serde_json::from_str(&text).map_err(|e| LlmError::BadReply(e.to_string()))
}

/// The provider's error message, if its body has the usual shape
/// (`{"error": {"message": ...}}`, as both OpenAI and Anthropic send).
fn provider_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| body.chars().take(200).collect())
}
