//! A credential record's sealed part: opened and sealed with SMS's key, its clear fields
//! (scopes, expiry, whether it has a refresh token) set from what it seals.

use spear_oauth::StoredCredentials;
use spear_proto::v1::CredentialRecord;

use super::Broker;
use crate::oauth::state::millis;
use crate::oauth::{BrokerError, SealingKey, VaultError};

impl Broker {
    /// The credential sealed in `record`; refused when another key sealed it
    /// or it was altered.
    pub(super) fn open(
        &self,
        key: &SealingKey,
        record: &CredentialRecord,
    ) -> Result<StoredCredentials, BrokerError> {
        if record.key_id != key.id() {
            return Err(BrokerError::WrongKey {
                id: record.server_id.clone(),
                sealed_with: record.key_id.clone(),
                have: key.id().to_string(),
            });
        }
        let corrupt = |reason: &str| VaultError::Corrupt {
            key: record.server_id.clone(),
            reason: reason.to_string(),
        };
        let plain = key
            .open(&record.server_id, &record.sealed)
            .map_err(|_| corrupt("its sealed part does not open with SMS's key: it was altered"))?;
        Ok(serde_json::from_slice(&plain)
            .map_err(|_| corrupt("its sealed part is not a credential"))?)
    }

    /// `base` with `held` sealed into it and its clear fields set from it.
    pub(super) fn seal(
        &self,
        key: &SealingKey,
        held: &StoredCredentials,
        mut base: CredentialRecord,
    ) -> Result<CredentialRecord, BrokerError> {
        let plain = serde_json::to_vec(held).map_err(|e| BrokerError::BadLogin {
            id: base.server_id.clone(),
            why: e.to_string(),
        })?;
        base.sealed = key
            .seal(&base.server_id, &plain)
            .map_err(|_| {
                VaultError::Unavailable("the system has no randomness to seal with".into())
            })?
            .into();
        base.key_id = key.id().to_string();
        base.scopes = held.granted_scopes.clone();
        base.expires_at_ms = spear_oauth::expires_at(held).map_or(0, millis);
        base.has_refresh_token = spear_oauth::has_refresh_token(held);
        base.problem.clear();
        Ok(base)
    }
}
