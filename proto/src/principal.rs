//! Who a run is for, and who may start one: the [`Principal`] SMS
//! verified travels with the invocation to the node, into every audit
//! record and the guest's read-only `principal` param; a task's
//! `"invokers"` ([`Invoker`]) say which principals besides admins may
//! invoke it (docs/identities.md).

use crate::v1::Principal;

/// `Principal.kind` of a person or workload signed in at the issuer.
pub const PERSON: &str = "person";
/// `Principal.kind` of an admin (a certificate or the admin token).
pub const ADMIN: &str = "admin";

/// The most groups kept from a token: a token listing more is not refused,
/// its extra groups are not matched.
pub const MAX_GROUPS: usize = 256;

impl Principal {
    /// A person or workload: `subject` at `issuer`, in `groups`.
    pub fn person(issuer: &str, subject: &str, mut groups: Vec<String>) -> Principal {
        groups.truncate(MAX_GROUPS);
        Principal {
            kind: PERSON.to_string(),
            issuer: issuer.to_string(),
            subject: subject.to_string(),
            groups,
        }
    }

    /// An admin, by the name its credential gives (`admin/ops`, `admin (token)`).
    pub fn admin(name: &str) -> Principal {
        Principal {
            kind: ADMIN.to_string(),
            subject: name.to_string(),
            ..Principal::default()
        }
    }

    /// How records, traces and metrics name it: `<issuer>#<subject>` for a
    /// person (a subject is unique only at its issuer), the admin's name
    /// otherwise.
    pub fn label(&self) -> String {
        if self.kind == PERSON {
            format!("{}#{}", self.issuer, self.subject)
        } else {
            self.subject.clone()
        }
    }
}

/// One entry of a task's `"invokers"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invoker {
    /// `subject:<sub>`: one person or workload at SMS's issuer.
    Subject(String),
    /// `group:<name>`: anyone the issuer lists in that group.
    Group(String),
    /// `spiffe://…`: a workload whose token's subject is that SPIFFE id
    /// (a JWT-SVID from an issuer SMS trusts).
    Spiffe(String),
}

/// Why an `"invokers"` entry is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvokerError {
    #[error("'{0}' is not subject:<sub>, group:<name> or spiffe://<domain>/<path>")]
    Form(String),
}

impl Invoker {
    pub fn parse(entry: &str) -> Result<Invoker, InvokerError> {
        let form = || InvokerError::Form(entry.chars().take(128).collect());
        let nonempty = |s: &str| (!s.is_empty() && s.len() <= 512).then(|| s.to_string());
        if let Some(sub) = entry.strip_prefix("subject:") {
            return nonempty(sub).map(Invoker::Subject).ok_or_else(form);
        }
        if let Some(group) = entry.strip_prefix("group:") {
            return nonempty(group).map(Invoker::Group).ok_or_else(form);
        }
        if entry.starts_with("spiffe://") && entry.len() > "spiffe://".len() {
            return Ok(Invoker::Spiffe(entry.to_string()));
        }
        Err(form())
    }

    /// Whether `principal` (verified at SMS's issuer) is this entry.
    pub fn admits(&self, principal: &Principal) -> bool {
        principal.kind == PERSON
            && match self {
                Invoker::Subject(sub) | Invoker::Spiffe(sub) => &principal.subject == sub,
                Invoker::Group(group) => principal.groups.contains(group),
            }
    }
}

/// Whether `invokers` (a task's, each already parsed when it was
/// registered) admit `principal`.
pub fn admitted(invokers: &[String], principal: &Principal) -> bool {
    invokers
        .iter()
        .filter_map(|entry| Invoker::parse(entry).ok())
        .any(|invoker| invoker.admits(principal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invokers_admit_by_subject_group_or_workload_id_only() {
        let alice = Principal::person("https://idp", "alice", vec!["eng".into()]);
        let bob = Principal::person("https://idp", "bob", vec![]);
        let invokers = vec!["subject:alice".to_string(), "group:ops".to_string()];
        assert!(admitted(&invokers, &alice));
        assert!(!admitted(&invokers, &bob));
        let ops = Principal::person("https://idp", "bob", vec!["ops".into()]);
        assert!(admitted(&invokers, &ops));
        // An admin named like a subject is not that subject.
        assert!(!admitted(&invokers, &Principal::admin("alice")));
        // A workload whose token's subject is its SPIFFE id.
        let spiffe = vec!["spiffe://spear.local/ci/nightly".to_string()];
        let nightly = Principal::person("https://spire", "spiffe://spear.local/ci/nightly", vec![]);
        assert!(admitted(&spiffe, &nightly));
        assert!(!admitted(&spiffe, &alice));
        assert!(!admitted(
            &spiffe,
            &Principal::admin("spiffe://spear.local/ci/nightly")
        ));
        assert_eq!(alice.label(), "https://idp#alice");
    }

    #[test]
    fn a_bad_entry_is_named() {
        for bad in ["alice", "subject:", "group:", "spiffe://", "user:alice"] {
            assert_eq!(
                Invoker::parse(bad),
                Err(InvokerError::Form(bad.to_string()))
            );
        }
    }
}
