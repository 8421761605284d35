//! [`Sealer`]: the `requestState` a 2026-07-28 client gets with a
//! server's `input_required` answer, and checks it on the retry. The
//! client must echo it byte for byte and may not read or change it
//! (SEP-2322 says to treat it as the attacker's), so it is the server's
//! own state sealed with HMAC-SHA256 under a key of this process, bound to
//! the call (the exposed tool name and the digest of its arguments, RFC
//! 8785) and to a deadline: a changed, replayed-for-another-call or stale
//! state is refused before anything reaches the server.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// How long a client has to answer a server's questions.
const ANSWER_WITHIN: Duration = Duration::from_secs(600);

/// Why a retry's `requestState` is refused.
#[derive(Debug, thiserror::Error)]
#[error("requestState was not issued for this call, or has expired: retry the call without it")]
pub struct StateRefused;

/// What a sealed state holds.
#[derive(Serialize, Deserialize)]
struct Held {
    tool: String,
    arguments: String,
    upstream: Option<String>,
    until: u64,
}

/// Seals and opens request states with one key.
pub struct Sealer {
    key: [u8; 32],
}

impl Default for Sealer {
    fn default() -> Self {
        Self {
            key: rand::random(),
        }
    }
}

impl Sealer {
    /// The state for the client: `upstream` (the server's own), bound to
    /// `tool` called with `arguments`.
    pub fn seal(&self, tool: &str, arguments: &str, upstream: Option<String>) -> String {
        let until = now().saturating_add(ANSWER_WITHIN.as_secs());
        let held = Held {
            tool: tool.to_string(),
            arguments: digest(arguments),
            upstream,
            until,
        };
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&held).unwrap_or_default());
        let tag = URL_SAFE_NO_PAD.encode(self.tag(&body));
        format!("{body}.{tag}")
    }

    /// The server's state a retry of `tool` with `arguments` brings back.
    pub fn open(
        &self,
        state: &str,
        tool: &str,
        arguments: &str,
    ) -> Result<Option<String>, StateRefused> {
        let (body, tag) = state.rsplit_once('.').ok_or(StateRefused)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| StateRefused)?;
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).map_err(|_| StateRefused)?;
        let bytes = URL_SAFE_NO_PAD.decode(body).map_err(|_| StateRefused)?;
        let held: Held = serde_json::from_slice(&bytes).map_err(|_| StateRefused)?;
        if held.tool != tool || held.arguments != digest(arguments) || held.until < now() {
            return Err(StateRefused);
        }
        Ok(held.upstream)
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        Hmac::<Sha256>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!())
    }

    fn tag(&self, body: &str) -> Vec<u8> {
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }
}

fn digest(arguments: &str) -> String {
    let arguments = if arguments.is_empty() {
        "{}"
    } else {
        arguments
    };
    spear_proto::approvals::arguments_digest(arguments).unwrap_or_default()
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    spear_common::clock::now_ms() / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_opens_only_for_its_own_call_untouched() {
        let sealer = Sealer::default();
        let state = sealer.seal("t", r#"{"a":1,"b":2}"#, Some("upstream".into()));
        // The same arguments in another order are the same call (RFC 8785).
        let opened = sealer.open(&state, "t", r#"{"b":2,"a":1}"#).unwrap();
        assert_eq!(opened.as_deref(), Some("upstream"));
        assert!(sealer.open(&state, "other", r#"{"a":1,"b":2}"#).is_err());
        assert!(sealer.open(&state, "t", r#"{"a":1,"b":3}"#).is_err());
        assert!(sealer
            .open(&format!("{state}-TAMPERED"), "t", r#"{"a":1,"b":2}"#)
            .is_err());
        let (body, tag) = state.rsplit_once('.').unwrap();
        let forged = URL_SAFE_NO_PAD
            .encode(br#"{"tool":"t","arguments":"x","upstream":"evil","until":99999999999}"#);
        assert!(sealer.open(&format!("{forged}.{tag}"), "t", "{}").is_err());
        assert!(sealer.open(body, "t", r#"{"a":1,"b":2}"#).is_err());
        // Another process's key opens nothing.
        assert!(Sealer::default()
            .open(&state, "t", r#"{"a":1,"b":2}"#)
            .is_err());
    }
}
