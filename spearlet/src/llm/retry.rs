//! One POST to a provider with retries on 429 and 5xx, honouring
//! `Retry-After`, and its answer read within a bound; every backend uses
//! it.

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
            .and_then(retry_after);
        if status.is_success() {
            return Ok(response);
        }
        // An error body is a sentence; a large one is not read whole.
        let body = read_bounded(response, MAX_ERROR_BYTES, true).await?;
        let text = String::from_utf8_lossy(&body);
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

/// The largest answer read from a provider, streamed or not.
pub const MAX_REPLY_BYTES: usize = 32 * 1024 * 1024;
/// The part of an error answer that is read.
const MAX_ERROR_BYTES: usize = 64 * 1024;
/// The longest a provider may ask us to wait before a retry.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// A `Retry-After` in seconds, bounded; `None` for anything else (an
/// HTTP date, a negative number, NaN), which falls back to the backoff.
fn retry_after(value: &str) -> Option<Duration> {
    let seconds = value.trim().parse::<f64>().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(seconds).min(MAX_RETRY_AFTER))
}

/// The body of `response`, at most `max` bytes: past it, an error (or,
/// with `truncate`, the first `max` bytes). Refused before reading when
/// the declared length is already too long.
async fn read_bounded(
    mut response: reqwest::Response,
    max: usize,
    truncate: bool,
) -> Result<Vec<u8>, LlmError> {
    let too_long = || {
        LlmError::BadReply(format!(
            "the answer is longer than {} MiB; it was not read further",
            max / (1024 * 1024)
        ))
    };
    if !truncate && response.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_long());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| LlmError::BadReply(describe(e)))?
    {
        if body.len() + chunk.len() > max {
            if truncate {
                body.extend_from_slice(&chunk[..max - body.len()]);
                return Ok(body);
            }
            return Err(too_long());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The JSON body of a successful response, at most [`MAX_REPLY_BYTES`].
pub async fn json(response: reqwest::Response) -> Result<Value, LlmError> {
    let body = read_bounded(response, MAX_REPLY_BYTES, false).await?;
    serde_json::from_slice(&body).map_err(|e| LlmError::BadReply(e.to_string()))
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn retry_after_never_panics_and_is_bounded() {
        assert_eq!(retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(retry_after("86400"), Some(MAX_RETRY_AFTER));
        for bad in [
            "NaN",
            "nan",
            "inf",
            "-inf",
            "-1",
            "",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "1e309",
        ] {
            assert_eq!(retry_after(bad), None, "{bad}");
        }
    }

    /// A provider that answers 200 with a chunked body of `total` bytes,
    /// written lazily; returns its URL and how many bytes it got out.
    async fn endless_provider(total: usize) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        let sent = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&sent);
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 64 * 1024];
            let _ = socket.read(&mut request).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b' '; 1024 * 1024];
            let framed = [
                format!("{:x}\r\n", chunk.len()).into_bytes(),
                chunk,
                b"\r\n".to_vec(),
            ]
            .concat();
            while counter.load(Ordering::Relaxed) < total {
                if socket.write_all(&framed).await.is_err() {
                    return;
                }
                counter.fetch_add(1024 * 1024, Ordering::Relaxed);
            }
            let _ = socket.write_all(b"0\r\n\r\n").await;
        });
        (url, sent)
    }

    #[tokio::test]
    async fn a_one_gib_answer_is_stopped_at_the_bound() {
        const GIB: usize = 1024 * 1024 * 1024;
        let (url, sent) = endless_provider(GIB).await;
        let client = reqwest::Client::new();
        let response = send(|| client.post(&url).body("{}"), Duration::from_secs(60), 0)
            .await
            .unwrap();
        let error = json(response).await.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("longer than 32 MiB; it was not read further"),
            "{error}"
        );
        // The provider wrote little past the bound (what the sockets buffer).
        let written = sent.load(Ordering::Relaxed);
        assert!(written < 128 * 1024 * 1024, "{written} bytes were sent");
    }
}
