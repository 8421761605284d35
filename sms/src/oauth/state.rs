//! A record's state as `sms oauth status` shows it: computed from the
//! record's clear fields and the registry, never from its sealed values.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use spear_proto::v1::{CredentialRecord, CredentialState, CredentialStatus, OauthGrant};

pub use spear_common::clock::unix_ms as millis;

/// The time `ms` Unix milliseconds name, if any (0 is none).
fn from_millis(ms: u64) -> Option<SystemTime> {
    (ms > 0).then(|| UNIX_EPOCH + Duration::from_millis(ms))
}

/// The status of `record`; `in_registry` says whether its server still is,
/// `key_id` is SMS's key.
pub fn status_of(
    record: &CredentialRecord,
    in_registry: bool,
    key_id: &str,
    now: SystemTime,
) -> CredentialStatus {
    let state = if !in_registry {
        CredentialState::Orphaned
    } else if record.key_id != key_id {
        CredentialState::Unreadable
    } else if !record.problem.is_empty() {
        CredentialState::NeedsLogin
    } else if from_millis(record.expires_at_ms).is_some_and(|at| at <= now) {
        CredentialState::Expired
    } else {
        CredentialState::Valid
    };
    CredentialStatus {
        server_id: record.server_id.clone(),
        state: state as i32,
        grant: record.grant,
        scopes: record.scopes.clone(),
        logged_in_at_ms: record.logged_in_at_ms,
        refreshed_at_ms: record.refreshed_at_ms,
        expires_at_ms: record.expires_at_ms,
        has_refresh_token: record.has_refresh_token,
        problem: record.problem.clone(),
        logged_in_by: record.logged_in_by.clone(),
    }
}

/// The status of a server with `auth` and no record yet.
pub fn status_without_record(server_id: &str, grant: OauthGrant) -> CredentialStatus {
    let state = match grant {
        OauthGrant::AuthorizationCode => CredentialState::NotLoggedIn,
        OauthGrant::ClientCredentials
        | OauthGrant::EnterpriseManaged
        | OauthGrant::JwtBearer
        | OauthGrant::TokenExchange => CredentialState::OnDemand,
    };
    CredentialStatus {
        server_id: server_id.to_string(),
        state: state as i32,
        grant: grant as i32,
        ..CredentialStatus::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_follow_the_clear_fields() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let record = CredentialRecord {
            server_id: "docs".into(),
            key_id: "k1".into(),
            expires_at_ms: 2_000_000,
            ..CredentialRecord::default()
        };
        let state = |r: &CredentialRecord, in_registry, key| {
            CredentialState::try_from(status_of(r, in_registry, key, now).state).unwrap()
        };
        assert_eq!(state(&record, true, "k1"), CredentialState::Valid);
        assert_eq!(state(&record, false, "k1"), CredentialState::Orphaned);
        assert_eq!(state(&record, true, "k2"), CredentialState::Unreadable);
        let expired = CredentialRecord {
            expires_at_ms: 999_000,
            ..record.clone()
        };
        assert_eq!(state(&expired, true, "k1"), CredentialState::Expired);
        let refused = CredentialRecord {
            problem: "refused".into(),
            ..record
        };
        assert_eq!(state(&refused, true, "k1"), CredentialState::NeedsLogin);
    }
}
