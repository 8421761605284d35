//! Identities as SPIFFE IDs: `spiffe://<trust-domain>/sms`,
//! `spiffe://<trust-domain>/node/<node-id>` and
//! `spiffe://<trust-domain>/admin/<name>`, carried as the URI SAN of a
//! certificate. Everything else (other paths, other schemes, a second URI)
//! is not an identity we know, and a peer presenting it has no role.

use std::fmt;

/// One installation's trust domain (`spear.example`): every identity it
/// trusts is under it, so a certificate from another installation's CA
/// path never passes for one of ours.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrustDomain(String);

/// A caller's role and name, from its certificate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Identity {
    /// An SMS replica. Replicas share the identity: any of them may route.
    Sms,
    /// A spearlet, by node id: the id it must heartbeat and watch as.
    Node(String),
    /// An operator or automation with admin rights.
    Admin(String),
}

/// Why a name or a URI is not an identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("trust domain '{0}' is not valid: use lowercase letters, digits, '.', '-' and '_', at most 255 characters")]
    Domain(String),
    #[error("'{0}' is not a valid name for an identity: use letters, digits, '.', '-' and '_', at most 128 characters")]
    Name(String),
    #[error("'{0}' is not a Spear identity: expected spiffe://<domain>/sms, /node/<id> or /admin/<name>")]
    Uri(String),
    #[error("identity {uri} is in trust domain '{found}', not '{expected}'")]
    OtherDomain {
        uri: String,
        found: String,
        expected: String,
    },
}

/// The characters node ids, admin names and trust domains may use: what
/// fits a URI path segment and a file name without escaping.
fn name_ok(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// Checks a node id or admin name (the longest one SMS keeps is 128).
pub fn check_name(name: &str) -> Result<(), IdentityError> {
    if name_ok(name, MAX_NAME) {
        Ok(())
    } else {
        Err(IdentityError::Name(name.to_string()))
    }
}

/// The longest node id or admin name.
pub const MAX_NAME: usize = 128;

impl TrustDomain {
    pub fn new(domain: &str) -> Result<Self, IdentityError> {
        let lower = domain.bytes().all(|b| !b.is_ascii_uppercase());
        if lower && name_ok(domain, 255) {
            Ok(Self(domain.to_string()))
        } else {
            Err(IdentityError::Domain(domain.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The URI of `identity` in this domain.
    pub fn uri(&self, identity: &Identity) -> String {
        match identity {
            Identity::Sms => format!("spiffe://{}/sms", self.0),
            Identity::Node(id) => format!("spiffe://{}/node/{id}", self.0),
            Identity::Admin(name) => format!("spiffe://{}/admin/{name}", self.0),
        }
    }

    /// Reads `uri` as an identity of this domain.
    pub fn parse(&self, uri: &str) -> Result<Identity, IdentityError> {
        let (domain, identity) = parse_uri(uri)?;
        if domain.0 != self.0 {
            return Err(IdentityError::OtherDomain {
                uri: uri.to_string(),
                found: domain.0,
                expected: self.0.clone(),
            });
        }
        Ok(identity)
    }
}

impl std::str::FromStr for Identity {
    type Err = IdentityError;

    /// Reads the short form [`Identity`]'s `Display` writes: `sms`,
    /// `node/<id>` or `admin/<name>`.
    fn from_str(short: &str) -> Result<Self, IdentityError> {
        match short.split_once('/') {
            None if short == "sms" => Ok(Identity::Sms),
            Some(("node", id)) if name_ok(id, MAX_NAME) => Ok(Identity::Node(id.to_string())),
            Some(("admin", name)) if name_ok(name, MAX_NAME) => {
                Ok(Identity::Admin(name.to_string()))
            }
            _ => Err(IdentityError::Uri(short.to_string())),
        }
    }
}

/// Reads any Spear SPIFFE URI: its trust domain and identity.
pub fn parse_uri(uri: &str) -> Result<(TrustDomain, Identity), IdentityError> {
    let bad = || IdentityError::Uri(uri.to_string());
    let rest = uri.strip_prefix("spiffe://").ok_or_else(bad)?;
    let (domain, path) = rest.split_once('/').ok_or_else(bad)?;
    let domain = TrustDomain::new(domain).map_err(|_| bad())?;
    let identity = match path.split_once('/') {
        None if path == "sms" => Identity::Sms,
        Some(("node", id)) if name_ok(id, MAX_NAME) => Identity::Node(id.to_string()),
        Some(("admin", name)) if name_ok(name, MAX_NAME) => Identity::Admin(name.to_string()),
        _ => return Err(bad()),
    };
    Ok((domain, identity))
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Sms => f.write_str("sms"),
            Identity::Node(id) => write!(f, "node/{id}"),
            Identity::Admin(name) => write!(f, "admin/{name}"),
        }
    }
}

impl fmt::Display for TrustDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_each_role() {
        let domain = TrustDomain::new("spear.test").unwrap();
        for identity in [
            Identity::Sms,
            Identity::Node("node-1".into()),
            Identity::Admin("ops".into()),
        ] {
            assert_eq!(domain.parse(&domain.uri(&identity)).unwrap(), identity);
        }
    }

    #[test]
    fn refuses_what_is_not_ours() {
        let domain = TrustDomain::new("spear.test").unwrap();
        for uri in [
            "spiffe://spear.test/node/",
            "spiffe://spear.test/node/a/b",
            "spiffe://spear.test/node/../sms",
            "spiffe://spear.test/sms/extra",
            "spiffe://spear.test/reader/x",
            "https://spear.test/sms",
            "spiffe://Spear.test/sms",
        ] {
            assert!(domain.parse(uri).is_err(), "{uri} was accepted");
        }
        let other = domain.parse("spiffe://other.test/sms").unwrap_err();
        assert!(other.to_string().contains("other.test"), "{other}");
    }
}
