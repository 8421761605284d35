//! [`TlsIdentity`]: this process's certificate, key and trusted CAs, kept
//! current from disk, with the rustls configurations built from them. It
//! is what a server accepts with and what a client dials with.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::configs::{anonymous_client_config, client_config, server_config};
use crate::material::{load_roots, Material, TlsError, TlsFiles};
use crate::reload::Watched;
use crate::spiffe::{Identity, TrustDomain};

/// One loaded set with its server configuration and the client
/// configuration for reaching SMS, which nodes use on every reconnect.
struct Loaded {
    material: Option<Material>,
    roots: Arc<RootCertStore>,
    server: Option<Arc<ServerConfig>>,
    to_sms: Arc<ClientConfig>,
}

impl Loaded {
    fn from_files(files: &TlsFiles) -> Result<Loaded, TlsError> {
        let material = files.load()?;
        let server = server_config(&material)?;
        let to_sms = client_config(&material, Identity::Sms)?;
        Ok(Loaded {
            roots: Arc::clone(&material.roots),
            material: Some(material),
            server: Some(server),
            to_sms,
        })
    }
}

/// This process's TLS identity (or, for a CLI holding only the CA bundle,
/// just whom it trusts), reloaded when the files change.
#[derive(Clone)]
pub struct TlsIdentity {
    loaded: Watched<Loaded>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let loaded = self.loaded.get();
        match &loaded.material {
            Some(m) => write!(f, "TlsIdentity({})", m.domain.uri(&m.identity)),
            None => f.write_str("TlsIdentity(anonymous)"),
        }
    }
}

impl TlsIdentity {
    /// Loads `files` and keeps them current. Must run inside Tokio.
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let paths = files.paths().map(PathBuf::from).to_vec();
        let loaded = Watched::start("TLS material", paths, move || Loaded::from_files(&files))?;
        Ok(Self { loaded })
    }

    /// Loads `files` once and never looks at them again: for a process
    /// that holds thousands of identities (the fleet bench), where checking
    /// every file each second would cost more than what it measures.
    pub fn load_once(files: &TlsFiles) -> Result<Self, TlsError> {
        Ok(Self {
            loaded: Watched::fixed(Loaded::from_files(files)?),
        })
    }

    /// A client with only a CA bundle: it checks that it reaches SMS but
    /// presents no certificate (an admin using the token).
    pub fn trust_only(ca: PathBuf) -> Result<Self, TlsError> {
        let loaded = Watched::start("CA bundle", vec![ca.clone()], move || {
            let roots = Arc::new(load_roots(&ca)?);
            let to_sms = anonymous_client_config(Arc::clone(&roots), Identity::Sms)?;
            Ok::<_, TlsError>(Loaded {
                material: None,
                roots,
                server: None,
                to_sms,
            })
        })?;
        Ok(Self { loaded })
    }

    /// Who this process is, when it has a certificate.
    pub fn identity(&self) -> Option<(TrustDomain, Identity)> {
        let loaded = self.loaded.get();
        loaded
            .material
            .as_ref()
            .map(|m| (m.domain.clone(), m.identity.clone()))
    }

    /// The current server configuration; `None` without a certificate.
    pub(crate) fn server_config(&self) -> Option<Arc<ServerConfig>> {
        self.loaded.get().server.clone()
    }

    /// The current client configuration for reaching `expect`.
    pub(crate) fn client_config(&self, expect: &Identity) -> Result<Arc<ClientConfig>, TlsError> {
        let loaded = self.loaded.get();
        if *expect == Identity::Sms {
            return Ok(Arc::clone(&loaded.to_sms));
        }
        match &loaded.material {
            Some(material) => client_config(material, expect.clone()),
            None => anonymous_client_config(Arc::clone(&loaded.roots), expect.clone()),
        }
    }
}

/// The three TLS flags as given (`--tls-ca`, `--tls-cert`, `--tls-key`).
#[derive(Debug, Clone, Default)]
pub struct TlsFlags {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// Why the TLS flags do not make a set.
#[derive(Debug, thiserror::Error)]
pub enum FlagsError {
    #[error("{0} is given without {1}; TLS needs --tls-ca, --tls-cert and --tls-key together")]
    Incomplete(&'static str, &'static str),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

impl TlsFlags {
    /// Any TLS flag given.
    pub fn any(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }

    /// A full set, as a server needs.
    pub fn files(&self) -> Result<Option<TlsFiles>, FlagsError> {
        match (&self.ca, &self.cert, &self.key) {
            (None, None, None) => Ok(None),
            (Some(ca), Some(cert), Some(key)) => Ok(Some(TlsFiles {
                ca: ca.clone(),
                cert: cert.clone(),
                key: key.clone(),
            })),
            (None, _, _) => Err(FlagsError::Incomplete(
                "--tls-cert or --tls-key",
                "--tls-ca",
            )),
            (_, None, _) => Err(FlagsError::Incomplete(
                "--tls-ca or --tls-key",
                "--tls-cert",
            )),
            (_, _, None) => Err(FlagsError::Incomplete(
                "--tls-ca or --tls-cert",
                "--tls-key",
            )),
        }
    }

    /// What a client dials with: nothing (plaintext), the CA alone (no
    /// certificate of its own), or the full set. Must run inside Tokio.
    pub fn client(&self) -> Result<Option<TlsIdentity>, FlagsError> {
        match (&self.ca, &self.cert, &self.key) {
            (Some(ca), None, None) => Ok(Some(TlsIdentity::trust_only(ca.clone())?)),
            _ => Ok(self.files()?.map(TlsIdentity::load).transpose()?),
        }
    }
}
