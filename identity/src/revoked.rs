//! Revoked certificates: the deny list `sms certs revoke` writes to SMS's
//! store, which SMS replicas follow and nodes receive from SMS. A
//! certificate is refused when its identity or its serial number is listed,
//! at the [`crate::Gate`] of every port, before its request is read.
//!
//! [`DenyList`] is the shared, swappable copy each process holds; whoever
//! learns a newer list [`DenyList::replace`]s it, and streams that must end
//! when their caller is revoked [`DenyList::subscribe`].

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::watch;

use crate::spiffe::Identity;

/// One revocation: every certificate for an identity, or one certificate
/// by serial number (lowercase hex, no separators).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Revoked {
    Identity(Identity),
    Serial(String),
}

impl std::fmt::Display for Revoked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Revoked::Identity(identity) => write!(f, "{identity}"),
            Revoked::Serial(serial) => write!(f, "serial {serial}"),
        }
    }
}

impl Revoked {
    /// Reads the wire form: an identity (`node/<id>`, `admin/<name>`,
    /// `sms`) or a serial in hex (colons and case as any tool prints it).
    pub fn from_wire(identity: Option<&str>, serial: Option<&str>) -> Option<Revoked> {
        match (identity, serial) {
            (Some(identity), None) => identity.parse().ok().map(Revoked::Identity),
            (None, Some(serial)) => {
                let hex: String = serial
                    .chars()
                    .filter(|c| *c != ':')
                    .map(|c| c.to_ascii_lowercase())
                    .collect();
                let bytes: Option<Vec<u8>> = (0..hex.len())
                    .step_by(2)
                    .map(|i| {
                        hex.get(i..i + 2)
                            .and_then(|b| u8::from_str_radix(b, 16).ok())
                    })
                    .collect();
                bytes
                    .filter(|b| !b.is_empty() && hex.len() % 2 == 0)
                    .map(|b| Revoked::Serial(serial_hex(&b)))
            }
            _ => None,
        }
    }
}

/// Writes a serial number the one way the list compares them.
pub fn serial_hex(bytes: &[u8]) -> String {
    let trimmed = match bytes.iter().position(|b| *b != 0) {
        Some(first) => &bytes[first..],
        None => &bytes[bytes.len().saturating_sub(1)..],
    };
    trimmed.iter().map(|b| format!("{b:02x}")).collect()
}

/// The entries of a deny list, split so a lookup borrows what it is given
/// (it runs for every request of a caller with a certificate).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Denied {
    identities: HashSet<Identity>,
    serials: HashSet<String>,
}

impl Denied {
    fn is_empty(&self) -> bool {
        self.identities.is_empty() && self.serials.is_empty()
    }

    fn len(&self) -> usize {
        self.identities.len() + self.serials.len()
    }
}

impl FromIterator<Revoked> for Denied {
    fn from_iter<I: IntoIterator<Item = Revoked>>(entries: I) -> Self {
        let mut denied = Denied::default();
        for entry in entries {
            match entry {
                Revoked::Identity(identity) => denied.identities.insert(identity),
                Revoked::Serial(serial) => denied.serials.insert(serial),
            };
        }
        denied
    }
}

/// The current deny list, shared by a process's ports.
#[derive(Clone)]
pub struct DenyList {
    current: Arc<watch::Sender<Arc<Denied>>>,
}

impl Default for DenyList {
    fn default() -> Self {
        Self {
            current: Arc::new(watch::Sender::new(Arc::default())),
        }
    }
}

impl std::fmt::Debug for DenyList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DenyList({} entries)", self.current.borrow().len())
    }
}

impl DenyList {
    /// Replaces the list; subscribers hear of it only when it changed.
    pub fn replace(&self, entries: impl IntoIterator<Item = Revoked>) {
        let next: Denied = entries.into_iter().collect();
        self.current.send_if_modified(|current| {
            if **current == next {
                return false;
            }
            *current = Arc::new(next);
            true
        });
    }

    /// Whether a certificate with `identity` and `serial` is revoked.
    pub fn refuses(&self, identity: &Identity, serial: Option<&str>) -> bool {
        let list = self.current.borrow();
        !list.is_empty()
            && (list.identities.contains(identity)
                || serial.is_some_and(|s| list.serials.contains(s)))
    }

    /// The entries now, sorted.
    pub fn entries(&self) -> Vec<Revoked> {
        let list = self.current.borrow();
        let mut out: Vec<Revoked> = list
            .identities
            .iter()
            .cloned()
            .map(Revoked::Identity)
            .chain(list.serials.iter().cloned().map(Revoked::Serial))
            .collect();
        out.sort();
        out
    }

    /// Changes from now on.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Denied>> {
        self.current.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_or_a_serial_is_refused() {
        let list = DenyList::default();
        let a = Identity::Node("a".into());
        assert!(!list.refuses(&a, Some("01")));
        list.replace([Revoked::Serial("0a1b".into())]);
        assert!(list.refuses(&Identity::Node("b".into()), Some("0a1b")));
        assert!(!list.refuses(&a, Some("01")));
        list.replace([Revoked::Identity(a.clone())]);
        assert!(list.refuses(&a, None));
        assert!(
            !list.refuses(&Identity::Node("b".into()), Some("0a1b")),
            "replaced, not added"
        );
    }

    #[test]
    fn the_wire_form_reads_identities_and_any_spelling_of_a_serial() {
        assert_eq!(
            Revoked::from_wire(Some("node/a"), None),
            Some(Revoked::Identity(Identity::Node("a".into())))
        );
        assert_eq!(
            Revoked::from_wire(None, Some("00:0A:FF")),
            Some(Revoked::Serial("0aff".into()))
        );
        assert_eq!(Revoked::from_wire(Some("nobody/x"), None), None);
        assert_eq!(Revoked::from_wire(None, Some("abc")), None);
        assert_eq!(Revoked::from_wire(None, Some("zz")), None);
        assert_eq!(Revoked::from_wire(Some("sms"), Some("01")), None);
    }

    #[test]
    fn serials_compare_without_leading_zeros() {
        assert_eq!(serial_hex(&[0, 0, 0x0a, 0xff]), "0aff");
        assert_eq!(serial_hex(&[0]), "00");
        assert_eq!(serial_hex(&[]), "");
    }

    #[test]
    fn subscribers_hear_only_changes() {
        let list = DenyList::default();
        let rx = list.subscribe();
        list.replace([]);
        assert!(!rx.has_changed().unwrap());
        list.replace([Revoked::Serial("01".into())]);
        assert!(rx.has_changed().unwrap());
    }
}
