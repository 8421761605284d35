//! A minimal HTTP/1.1 GET for reading the binaries' status endpoints.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// GETs `path` from `addr` (host:port); returns the body of a 200 response.
pub fn get(addr: &str, path: &str) -> Result<String, String> {
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
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {}", head.lines().next().unwrap_or("")));
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(dechunk(body));
    }
    Ok(body.to_string())
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
