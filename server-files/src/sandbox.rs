//! `"sandbox"`: how a stdio server is confined on nodes (docs/security.md,
//! "The sandbox"). Either `"off"` (honoured only where a node's policy
//! allows it) or an object granting paths, destinations and bounds beyond
//! the default sandbox.

use serde_json::{Map, Value};
use spear_proto::v1::{Sandbox, ServerSpec, Transport};

use super::values::{bounded, kind, string_list, unknown_keys, Problems};

const KEYS: &[&str] = &["read", "write", "connect", "memory_mb", "processes"];
pub const MAX_MEMORY_MB: u64 = 256 * 1024;
pub const MAX_PROCESSES: u64 = 16 * 1024;
/// Below this a language runtime does not start.
pub const MIN_MEMORY_MB: u64 = 16;

/// Parses `entry["sandbox"]` of a server at `path`.
pub fn sandbox(
    problems: &mut Problems,
    path: &str,
    entry: &Map<String, Value>,
    spec: &ServerSpec,
) -> Option<Sandbox> {
    let value = entry.get("sandbox")?;
    let at = format!("{path}.sandbox");
    if spec.transport != Transport::Stdio as i32 {
        problems.push(&at, "a sandbox is for stdio servers (processes a node starts); a remote server runs elsewhere");
        return None;
    }
    let object = match value {
        Value::String(s) if s == "off" => {
            return Some(Sandbox {
                off: true,
                ..Default::default()
            })
        }
        Value::Object(object) => object,
        other => {
            let found = match other {
                Value::String(s) => format!("'{}'", s.escape_default()),
                other => kind(other).to_string(),
            };
            problems.push(&at, format!("expected \"off\" or an object {{\"read\", \"write\", \"connect\", \"memory_mb\", \"processes\"}}, found {found}"));
            return None;
        }
    };
    unknown_keys(problems, &at, object, KEYS);
    let read = paths(problems, &at, object, "read");
    let write = paths(problems, &at, object, "write");
    let connect = string_list(problems, &at, object, "connect", false).unwrap_or_default();
    for (i, destination) in connect.iter().enumerate() {
        if let Err(why) = check_destination(destination) {
            problems.push(&format!("{at}.connect[{i}]"), why.to_string());
        }
    }
    let memory_mb = object.get("memory_mb").map_or(0, |v| {
        let mb = bounded(
            problems,
            &format!("{at}.memory_mb"),
            v,
            MAX_MEMORY_MB,
            "MiB",
        );
        if mb != 0 && mb < MIN_MEMORY_MB {
            problems.push(
                &format!("{at}.memory_mb"),
                format!(
                    "{mb} MiB is too little for any server to start; give at least {MIN_MEMORY_MB}"
                ),
            );
        }
        mb as u32
    });
    let processes = object.get("processes").map_or(0, |v| {
        bounded(
            problems,
            &format!("{at}.processes"),
            v,
            MAX_PROCESSES,
            "processes",
        ) as u32
    });
    Some(Sandbox {
        off: false,
        read,
        write,
        connect,
        memory_mb,
        processes,
    })
}

fn paths(problems: &mut Problems, at: &str, object: &Map<String, Value>, key: &str) -> Vec<String> {
    let list = string_list(problems, at, object, key, false).unwrap_or_default();
    for (i, path) in list.iter().enumerate() {
        let why = if !path.starts_with('/') {
            Some("must be an absolute path (the node's file system)")
        } else if path.split('/').any(|part| part == "..") {
            Some("must not contain '..'; name the directory itself")
        } else if path.trim_end_matches('/').is_empty() {
            Some("grants the whole file system; name the directories the server needs")
        } else if path.contains('\0') {
            Some("holds a NUL character")
        } else {
            None
        };
        if let Some(why) = why {
            problems.push(
                &format!("{at}.{key}[{i}]"),
                format!("'{}' {why}", path.escape_default()),
            );
        }
    }
    list
}

/// Why a declared destination is refused; `shown` is the destination as
/// written, escaped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadDestination {
    #[error("'{shown}' is not host:port (e.g. \"api.github.com:443\")")]
    NotHostPort { shown: String },
    #[error("'{shown}' has no port from 1 to 65535")]
    Port { shown: String },
    #[error("'{shown}': IPv6 destinations are not supported; name the host")]
    Ipv6 { shown: String },
    #[error("'{shown}': '{host}' is not a host name or an IPv4 address")]
    Host { shown: String, host: String },
}

/// A destination is `host:port`: a DNS name or an IPv4 address, and a
/// port from 1 to 65535.
pub fn check_destination(destination: &str) -> Result<(), BadDestination> {
    let shown = destination.escape_default().to_string();
    let Some((host, port)) = destination.rsplit_once(':') else {
        return Err(BadDestination::NotHostPort { shown });
    };
    if !port.parse::<u16>().is_ok_and(|p| p != 0) {
        return Err(BadDestination::Port { shown });
    }
    if host.contains(':') || host.starts_with('[') {
        return Err(BadDestination::Ipv6 { shown });
    }
    let name_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !name_ok {
        return Err(BadDestination::Host {
            shown,
            host: host.escape_default().to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_destination;

    #[test]
    fn destinations_are_host_and_port() {
        assert!(check_destination("api.github.com:443").is_ok());
        assert!(check_destination("10.0.0.5:5432").is_ok());
        for bad in [
            "api.github.com",
            "x:0",
            "x:70000",
            "[::1]:443",
            "*.github.com:443",
            ":443",
            "a..b:1",
            "-a:1",
        ] {
            assert!(check_destination(bad).is_err(), "{bad}");
        }
    }
}
