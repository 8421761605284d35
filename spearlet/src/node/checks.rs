//! What a node checks before it builds anything: that it will not speak to
//! SMS in clear unless asked (and then never anonymously), and who it is
//! (its certificate's id, `--node-id`, or the one kept in its state dir).
//! And, once its ports are bound, the loud warning when it runs insecure.

use std::net::SocketAddr;

use spear_identity::{Identity, TlsIdentity};

use super::{NodeConfig, NodeError};
use crate::persist::StateDir;

/// The first SMS address the node would reach in plaintext beyond
/// loopback, refused unless `--insecure` and a join token allow it.
pub fn transport(config: &NodeConfig) -> Result<Option<String>, NodeError> {
    if config.sms.is_empty() {
        return Err(NodeError::NoSms);
    }
    let plaintext_sms = config
        .sms
        .iter()
        .find(|addr| !spear_common::insecure::is_loopback(addr))
        .filter(|_| config.tls.is_none())
        .cloned();
    if let (Some(addr), false) = (&plaintext_sms, config.insecure) {
        return Err(NodeError::InsecureSms(addr.clone()));
    }
    if plaintext_sms.is_some() && !config.join_token.is_set() {
        return Err(NodeError::InsecureWithoutJoinToken(
            "follow SMS",
            "this node",
        ));
    }
    Ok(plaintext_sms)
}

/// The node's id: with TLS the certificate says who the node is (and a
/// `--node-id` must agree); else `--node-id`, else the state dir's own.
pub fn node_id(config: &NodeConfig, state: &StateDir) -> Result<String, NodeError> {
    let cert_id = match config.tls.as_ref().and_then(TlsIdentity::identity) {
        Some((_, Identity::Node(id))) => Some(id),
        Some((_, other)) => return Err(NodeError::NotNode(other)),
        None => None,
    };
    Ok(match (config.node_id.clone(), cert_id) {
        (Some(given), Some(cert)) if given != cert => {
            return Err(NodeError::IdMismatch { given, cert })
        }
        (_, Some(cert)) => cert,
        (Some(id), None) => id,
        (None, None) => state.node_id(default_node_id)?,
    })
}

/// Warns loudly (at start and every few minutes) when the node runs
/// without TLS beyond loopback, as `--insecure` allowed; whether it does.
pub fn warn_if_insecure(
    config: &NodeConfig,
    plaintext_sms: Option<&str>,
    invoke_addr: Option<SocketAddr>,
) -> bool {
    let plaintext_invoke = invoke_addr.filter(|addr| !addr.ip().is_loopback());
    let because = match (&config.tls, plaintext_sms, plaintext_invoke) {
        (Some(_), ..) => None,
        (None, Some(sms), _) => Some(format!(
            "the node follows SMS at {sms} in plaintext (--insecure)"
        )),
        (None, None, Some(addr)) => Some(format!(
            "the node serves invocations in plaintext on {addr} (--insecure)"
        )),
        (None, None, None) => None,
    };
    match because {
        Some(what) => {
            spear_common::insecure::warn_loudly(what);
            true
        }
        None => false,
    }
}

fn default_node_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(40)
        .collect();
    let host = if host.is_empty() {
        "node".to_string()
    } else {
        host
    };
    format!("{host}-{:06x}", rand::random::<u32>() & 0xff_ffff)
}
