//! A minimal HTTP/1.1 GET for reading the binaries' status endpoints.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// GETs `path` from `addr` (host:port); returns the body of a 200 response.
pub fn get(addr: &str, path: &str) -> Result<String, String> {
    match get_status(addr, path)? {
        (200, body) => Ok(body),
        (code, _) => Err(format!("GET {path}: HTTP {code}")),
    }
}

/// GETs `path` from `addr`; returns the status code and the body, whatever
/// the code (probes answer 503 with a reason).
pub fn get_status(addr: &str, path: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("read {addr}{path}: {e}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or("malformed HTTP response")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            format!(
                "GET {path}: no status in {}",
                head.lines().next().unwrap_or("")
            )
        })?;
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok((code, dechunk(body)));
    }
    Ok((code, body.to_string()))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// GETs a JSON document.
pub fn get_json(addr: &str, path: &str) -> Result<serde_json::Value, String> {
    let body = get(addr, path)?;
    serde_json::from_str(&body).map_err(|e| format!("{path} is not JSON ({e}): {body}"))
}

/// The value of an unlabelled metric in the Prometheus text at
/// `addr/metrics`; an error when the endpoint or the metric is missing.
pub fn metric(addr: &str, name: &str) -> Result<f64, String> {
    let text = get(addr, "/metrics")?;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| format!("no metric {name} at {addr}"))
}
