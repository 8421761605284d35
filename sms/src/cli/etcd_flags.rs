//! What the etcd flags of `sms serve` name, checked before SMS starts:
//! TLS to etcd (`--etcd-ca`, `--etcd-cert`, `--etcd-key`) and its user
//! (`--etcd-user`, the password from a file or the environment).

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};

use super::config::readable;
use crate::store::{EtcdTls, EtcdUser};

/// TLS to etcd from `--etcd-ca` and, for client certificates, both
/// `--etcd-cert` and `--etcd-key`; the files are re-read when they change.
pub(super) fn etcd_tls(
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
) -> Result<Option<EtcdTls>> {
    let identity = match (cert, key) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            Some((readable("--etcd-cert", cert)?, readable("--etcd-key", key)?))
        }
        _ => bail!("--etcd-cert and --etcd-key go together"),
    };
    match ca {
        Some(ca) => Ok(Some(EtcdTls {
            ca: readable("--etcd-ca", ca)?,
            identity,
        })),
        None if identity.is_some() => {
            bail!("--etcd-cert needs --etcd-ca (the CA etcd's certificate chains to)")
        }
        None => Ok(None),
    }
}

/// The etcd user; its password from the file or `SMS_ETCD_PASSWORD`,
/// never from a flag.
pub(super) fn etcd_user(
    name: Option<String>,
    password_file: Option<PathBuf>,
) -> Result<Option<EtcdUser>> {
    let Some(name) = name else {
        if password_file.is_some() {
            bail!("--etcd-password-file needs --etcd-user");
        }
        return Ok(None);
    };
    let password = match password_file {
        Some(path) => std::fs::read_to_string(&path)
            .with_context(|| format!("--etcd-password-file {}: cannot read it", path.display()))?
            .trim_end_matches(['\n', '\r'])
            .to_string(),
        None => std::env::var("SMS_ETCD_PASSWORD").map_err(|_| {
            anyhow!("--etcd-user {name} needs a password: --etcd-password-file FILE or SMS_ETCD_PASSWORD")
        })?,
    };
    Ok(Some(EtcdUser { name, password }))
}
