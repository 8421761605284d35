//! What SMS checks before it builds anything: no plaintext beyond loopback
//! unless asked, and then never anonymous (tokens stand in for the
//! certificates a plaintext port cannot check); a certificate that is
//! SMS's. And, once bound, the loud warning when it runs insecure.

use std::net::SocketAddr;

use spear_identity::{Identity, TlsIdentity};
use tracing::warn;

use super::{SmsConfig, StartError};

pub fn transport(config: &SmsConfig) -> Result<(), StartError> {
    let plaintext_beyond_loopback = config.tls.is_none() && !config.listen.ip().is_loopback();
    if plaintext_beyond_loopback && !config.insecure {
        return Err(StartError::Insecure(config.listen));
    }
    if plaintext_beyond_loopback && !config.join_token.is_set() {
        return Err(StartError::InsecureWithoutToken(
            config.listen,
            "--join-token-file",
            "a node",
        ));
    }
    if plaintext_beyond_loopback && !config.admin_token.is_set() {
        return Err(StartError::InsecureWithoutToken(
            config.listen,
            "--admin-token-file",
            "an admin",
        ));
    }
    if let Some((_, identity)) = config.tls.as_ref().and_then(TlsIdentity::identity) {
        if identity != Identity::Sms {
            return Err(StartError::NotSms(identity));
        }
    }
    Ok(())
}

/// Warns loudly when SMS serves plaintext beyond loopback (as `--insecure`
/// allowed), and once when a loopback port takes nodes without a join
/// token; whether it is insecure.
pub fn warn_if_insecure(config: &SmsConfig, grpc_addr: SocketAddr) -> bool {
    let insecure = config.tls.is_none() && !grpc_addr.ip().is_loopback();
    if insecure {
        spear_common::insecure::warn_loudly(format!(
            "SMS serves plaintext on {grpc_addr} (--insecure)"
        ));
    } else if config.tls.is_none() && !config.join_token.is_set() {
        warn!(
            "SMS serves plaintext on {grpc_addr} without --join-token-file: anyone on this machine can act as a node (fine for a laptop; see docs/security.md)"
        );
    }
    insecure
}
