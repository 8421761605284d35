//! One credential per node on a plaintext plane, and the one-time join
//! tokens a node starts from (docs/security.md, "Node credentials").
//! Entry points: [`NodeTokens`] (SMS's half: mints and checks, holds the
//! secret) and [`NodeToken`] (a node's half: presents its own).
//!
//! SMS's `--join-token-file` holds a secret no node ever sees. From it SMS
//! derives, by HMAC-SHA256:
//! - a **node token** for one node id, `spear-node~<id>~<mac>`: what that
//!   node presents on every call to SMS (as `spear-join-token`), and what
//!   SMS presents to that node's Invocation port. It names its node, so a
//!   holder of node-b's token is node-b and nobody else: it cannot watch,
//!   heartbeat, ship audit records or open sealed values as node-a. It is
//!   revoked with the node (`sms certs revoke --node ID`) or with the secret.
//! - a **join token** for one node id, `spear-join~<id>~<expires>~<nonce>~<mac>`
//!   (`sms nodes join-token NODE --ttl`): single use and short lived; a
//!   node presents it once (`Nodes.Join`) and receives its node token.
//!   SMS remembers spent nonces until the token would have expired.
//!
//! Nothing is stored per node: a token checks against the secret alone, so
//! replicas sharing the secret agree, and rotating the secret revokes every
//! token at once.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::token::JoinToken;

const NODE_PREFIX: &str = "spear-node";
const JOIN_PREFIX: &str = "spear-join";
/// Not a character of node ids (letters, digits, `.`, `-`, `_`).
const SEP: char = '~';
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The longest a join token may live: a day.
pub const MAX_JOIN_TTL_S: u64 = 86_400;

/// Why a presented token is refused. Never carries the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error("SMS has no --join-token-file, so it gives no node tokens")]
    NoSecret,
    #[error(
        "the token is not a Spear node token (`spear-node~<id>~…`, from `sms nodes join-token`)"
    )]
    Malformed,
    #[error("the token is not one SMS made (wrong, or its --join-token-file changed since)")]
    Forged,
    #[error(
        "the join token for node '{0}' expired; make a new one with `sms nodes join-token {0}`"
    )]
    Expired(String),
    #[error("the join token for node '{node}' was made for node '{node}', not '{asked}'")]
    OtherNode { node: String, asked: String },
    #[error("the join token for node '{0}' was already used; a join token works once (make a new one with `sms nodes join-token {0}`)")]
    Spent(String),
    #[error("node id '{0}' cannot have a token: use letters, digits, '.', '-' and '_'")]
    BadId(String),
    #[error("a join token lives 1 s to {MAX_JOIN_TTL_S} s")]
    BadTtl,
}

/// A join token that checked out: whose, until when, and its nonce (what
/// the spent list remembers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinClaim {
    pub node_id: String,
    pub expires_unix: u64,
    pub nonce: String,
}

/// SMS's half: the secret, read from `--join-token-file` (re-read when it
/// changes).
#[derive(Clone, Debug, Default)]
pub struct NodeTokens {
    secret: JoinToken,
}

fn valid_id(node_id: &str) -> bool {
    !node_id.is_empty()
        && node_id.len() <= 253
        && node_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

impl NodeTokens {
    pub fn new(secret: JoinToken) -> Self {
        Self { secret }
    }

    /// Whether SMS has a secret (and so asks nodes for tokens).
    pub fn is_set(&self) -> bool {
        self.secret.is_set()
    }

    fn mac(&self, fields: &[&str]) -> Result<String, TokenRefusal> {
        let secret = self.secret.secret().ok_or(TokenRefusal::NoSecret)?;
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
            .map_err(|_| TokenRefusal::NoSecret)?;
        for field in fields {
            // Length-prefixed, so no two field lists hash alike.
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field.as_bytes());
        }
        Ok(B64.encode(mac.finalize().into_bytes()))
    }

    /// The node token of `node_id`.
    pub fn node_token(&self, node_id: &str) -> Result<String, TokenRefusal> {
        if !valid_id(node_id) {
            return Err(TokenRefusal::BadId(node_id.to_string()));
        }
        let mac = self.mac(&[NODE_PREFIX, node_id])?;
        Ok(format!("{NODE_PREFIX}{SEP}{node_id}{SEP}{mac}"))
    }

    /// Presents `node_id`'s own token on a call SMS makes to that node
    /// (its plaintext Invocation port); nothing when SMS has no secret.
    pub fn attach_for(&self, node_id: &str, metadata: &mut tonic::metadata::MetadataMap) {
        let Ok(token) = self.node_token(node_id) else {
            return;
        };
        if let Ok(mut value) = tonic::metadata::AsciiMetadataValue::try_from(token) {
            value.set_sensitive(true);
            metadata.insert(crate::token::JOIN_TOKEN_HEADER, value);
        }
    }

    /// The node a presented node token is for.
    pub fn check_node_token(&self, presented: &[u8]) -> Result<String, TokenRefusal> {
        let text = std::str::from_utf8(presented).map_err(|_| TokenRefusal::Malformed)?;
        let mut parts = text.split(SEP);
        let (Some(NODE_PREFIX), Some(node_id), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenRefusal::Malformed);
        };
        let expected = self.node_token(node_id).map_err(|e| match e {
            TokenRefusal::BadId(_) => TokenRefusal::Malformed,
            other => other,
        })?;
        if constant_time_eq(expected.as_bytes(), presented) {
            Ok(node_id.to_string())
        } else {
            Err(TokenRefusal::Forged)
        }
    }

    /// A join token for `node_id`, valid `ttl_s` seconds from `now_unix`.
    pub fn mint_join(
        &self,
        node_id: &str,
        ttl_s: u64,
        now_unix: u64,
    ) -> Result<String, TokenRefusal> {
        if !valid_id(node_id) {
            return Err(TokenRefusal::BadId(node_id.to_string()));
        }
        if ttl_s == 0 || ttl_s > MAX_JOIN_TTL_S {
            return Err(TokenRefusal::BadTtl);
        }
        let expires = (now_unix + ttl_s).to_string();
        let nonce = B64.encode(rand::random::<[u8; 18]>());
        let mac = self.mac(&[JOIN_PREFIX, node_id, &expires, &nonce])?;
        Ok(format!(
            "{JOIN_PREFIX}{SEP}{node_id}{SEP}{expires}{SEP}{nonce}{SEP}{mac}"
        ))
    }

    /// Checks a join token presented by `asked` (the node id the caller
    /// claims) at `now_unix`. Whether it was spent is the caller's to
    /// check, with [`JoinClaim::nonce`].
    pub fn check_join(
        &self,
        presented: &str,
        asked: &str,
        now_unix: u64,
    ) -> Result<JoinClaim, TokenRefusal> {
        let parts: Vec<&str> = presented.split(SEP).collect();
        let [JOIN_PREFIX, node_id, expires, nonce, mac] = parts[..] else {
            return Err(TokenRefusal::Malformed);
        };
        let expected = self.mac(&[JOIN_PREFIX, node_id, expires, nonce])?;
        if !constant_time_eq(expected.as_bytes(), mac.as_bytes()) {
            return Err(TokenRefusal::Forged);
        }
        if node_id != asked {
            return Err(TokenRefusal::OtherNode {
                node: node_id.to_string(),
                asked: asked.to_string(),
            });
        }
        let expires_unix: u64 = expires.parse().map_err(|_| TokenRefusal::Malformed)?;
        if now_unix >= expires_unix {
            return Err(TokenRefusal::Expired(node_id.to_string()));
        }
        Ok(JoinClaim {
            node_id: node_id.to_string(),
            expires_unix,
            nonce: nonce.to_string(),
        })
    }
}

/// Whether `token` is a join token (to be exchanged) rather than a node
/// token (to be presented).
pub fn is_join_token(token: &str) -> bool {
    token.starts_with(JOIN_PREFIX) && token[JOIN_PREFIX.len()..].starts_with(SEP)
}

/// Whether `token` is a node token, and for which node.
pub fn node_token_id(token: &str) -> Option<&str> {
    let mut parts = token.split(SEP);
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(NODE_PREFIX), Some(id), Some(_), None) => Some(id),
        _ => None,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(secret: &str) -> NodeTokens {
        NodeTokens::new(JoinToken::fixed(secret))
    }

    #[test]
    fn a_node_token_names_its_node_and_nothing_else_passes_for_it() {
        let sms = tokens("secret-0123456789abcdef");
        let a = sms.node_token("node-a").unwrap_or_default();
        assert_eq!(sms.check_node_token(a.as_bytes()), Ok("node-a".into()));
        // node-a's mac under node-b's name, another secret's token, junk.
        let forged = a.replace("node-a", "node-b");
        assert_eq!(
            sms.check_node_token(forged.as_bytes()),
            Err(TokenRefusal::Forged)
        );
        let other = tokens("another-0123456789abcdef")
            .node_token("node-a")
            .unwrap_or_default();
        assert_eq!(
            sms.check_node_token(other.as_bytes()),
            Err(TokenRefusal::Forged)
        );
        assert_eq!(
            sms.check_node_token(b"secret-0123456789abcdef"),
            Err(TokenRefusal::Malformed)
        );
        assert_eq!(node_token_id(&a), Some("node-a"));
        assert!(!is_join_token(&a));
    }

    #[test]
    fn a_join_token_is_for_one_node_and_one_period() {
        let sms = tokens("secret-0123456789abcdef");
        let join = sms.mint_join("node-a", 3600, 1_000).unwrap_or_default();
        assert!(is_join_token(&join));
        let claim = sms.check_join(&join, "node-a", 1_001);
        assert!(matches!(&claim, Ok(c) if c.node_id == "node-a" && c.expires_unix == 4_600));
        assert!(matches!(
            sms.check_join(&join, "node-b", 1_001),
            Err(TokenRefusal::OtherNode { .. })
        ));
        assert_eq!(
            sms.check_join(&join, "node-a", 4_600),
            Err(TokenRefusal::Expired("node-a".into()))
        );
        // A longer life written into the token breaks its mac.
        let stretched = join.replace("~4600~", "~99999~");
        assert_eq!(
            sms.check_join(&stretched, "node-a", 1_001),
            Err(TokenRefusal::Forged)
        );
        assert_eq!(sms.mint_join("node-a", 0, 1_000), Err(TokenRefusal::BadTtl));
        assert!(matches!(
            sms.mint_join("../x", 60, 1_000),
            Err(TokenRefusal::BadId(_))
        ));
        assert_eq!(
            NodeTokens::default().node_token("node-a"),
            Err(TokenRefusal::NoSecret)
        );
    }
}
