//! `sms certs`: a small CA for one installation, enough for a test
//! cluster or a handful of machines. [`init`] makes the CA in a directory;
//! [`issue`] gives SMS, a node or an admin a key and a certificate whose
//! `spiffe://` URI SAN is its identity. Larger installations bring their
//! own CA (cert-manager, SPIRE) and only need the same URI SANs.
//!
//! The directory holds `ca.pem` (give it to every process as `--tls-ca`),
//! `ca.key` (keep it here: it mints identities), `trust-domain`, and per
//! identity `<role>-<name>.pem` and `<role>-<name>.key`. Keys are written
//! 0600 and never printed.

use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use spear_identity::{Identity, IdentityError, TrustDomain};
use time::{Duration, OffsetDateTime};

/// Why a CA or certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error("{0} already holds a CA; use another directory, or remove ca.pem and ca.key to start over (every issued certificate then stops being trusted)")]
    Exists(PathBuf),
    #[error("{0} holds no CA; run `sms certs init {0} --trust-domain <domain>` first")]
    NoCa(PathBuf),
    #[error("cannot write {path}: {cause}")]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot read {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the CA in {dir} cannot be used: {cause}")]
    BadCa { dir: PathBuf, cause: String },
    #[error("cannot make the certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("'{0}' is not a valid DNS name for a certificate")]
    Dns(String),
    #[error("--days must be 1 to 3650")]
    Days,
    #[error("the system has no randomness to give for a serial number")]
    Random,
    #[error("the certificate request is not a valid signed PKCS#10 request: {0}")]
    BadRequest(String),
}

const CA_CERT: &str = "ca.pem";
const CA_KEY: &str = "ca.key";
const DOMAIN_FILE: &str = "trust-domain";

/// Whom a certificate is for.
#[derive(Debug, Clone)]
pub enum Subject {
    /// SMS, a node or an admin: the URI SAN carries the identity.
    Identity(Identity),
    /// A server Spear talks to that is not Spear (etcd): DNS and IP SANs
    /// only, no identity, so it has no role anywhere in Spear.
    Host(String),
}

/// What `sms certs issue` was asked for.
#[derive(Debug, Clone)]
pub struct Request {
    pub subject: Subject,
    pub dns: Vec<String>,
    pub ips: Vec<IpAddr>,
    pub days: u32,
}

/// The files one issue wrote.
#[derive(Debug)]
pub struct Issued {
    /// The identity's URI; `None` for a host certificate.
    pub uri: Option<String>,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The certificate's serial number in hex, for `sms certs revoke --serial`.
    pub serial: String,
}

/// Makes a CA for `domain` in `dir` (created if missing).
pub fn init(dir: &Path, domain: &str) -> Result<PathBuf, CertsError> {
    let domain = TrustDomain::new(domain)?;
    if dir.join(CA_CERT).exists() || dir.join(CA_KEY).exists() {
        return Err(CertsError::Exists(dir.to_path_buf()));
    }
    std::fs::create_dir_all(dir).map_err(|cause| CertsError::Write {
        path: dir.to_path_buf(),
        cause,
    })?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("Spear CA for {domain}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + Duration::days(3650);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    write(&dir.join(CA_KEY), &key.serialize_pem(), true)?;
    write(&dir.join(CA_CERT), &cert.pem(), false)?;
    write(&dir.join(DOMAIN_FILE), &format!("{domain}\n"), false)?;
    Ok(dir.join(CA_CERT))
}

/// Issues a key and certificate for `request` from the CA in `dir`.
pub fn issue(dir: &Path, request: &Request) -> Result<Issued, CertsError> {
    if request.days == 0 || request.days > 3650 {
        return Err(CertsError::Days);
    }
    if let Subject::Identity(Identity::Node(name) | Identity::Admin(name)) | Subject::Host(name) =
        &request.subject
    {
        spear_identity::spiffe::check_name(name)?;
    }
    if !dir.join(CA_CERT).exists() {
        return Err(CertsError::NoCa(dir.to_path_buf()));
    }
    let domain = TrustDomain::new(read(&dir.join(DOMAIN_FILE))?.trim())?;
    let bad_ca = |cause: rcgen::Error| CertsError::BadCa {
        dir: dir.to_path_buf(),
        cause: cause.to_string(),
    };
    let issuer = load_issuer(dir, bad_ca)?;
    let (params, serial) = leaf_params(&domain, request)?;
    let uri = match &request.subject {
        Subject::Identity(identity) => Some(domain.uri(identity)),
        Subject::Host(_) => None,
    };
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;

    let stem = match &request.subject {
        Subject::Identity(Identity::Sms) => "sms".to_string(),
        Subject::Identity(Identity::Node(id)) => format!("node-{id}"),
        Subject::Identity(Identity::Admin(name)) => format!("admin-{name}"),
        Subject::Host(name) => format!("host-{name}"),
    };
    let cert_path = dir.join(format!("{stem}.pem"));
    let key_path = dir.join(format!("{stem}.key"));
    // Key first and both replaced by rename: a process reloading them
    // never sees a certificate without its key for long.
    write(&key_path, &key.serialize_pem(), true)?;
    write(&cert_path, &cert.pem(), false)?;
    Ok(Issued {
        uri,
        cert: cert_path,
        key: key_path,
        serial: spear_identity::revoked::serial_hex(&serial),
    })
}

type IssuerOf = Issuer<'static, KeyPair>;

fn load_issuer(
    dir: &Path,
    bad_ca: impl Fn(rcgen::Error) -> CertsError,
) -> Result<IssuerOf, CertsError> {
    let ca_key = KeyPair::from_pem(&read(&dir.join(CA_KEY))?).map_err(&bad_ca)?;
    Issuer::from_ca_cert_pem(&read(&dir.join(CA_CERT))?, ca_key).map_err(bad_ca)
}

/// A leaf certificate's parameters for `request`, with a fresh serial.
fn leaf_params(
    domain: &TrustDomain,
    request: &Request,
) -> Result<(CertificateParams, [u8; 16]), CertsError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let common_name = match &request.subject {
        Subject::Identity(identity) => {
            let uri = domain.uri(identity);
            params.subject_alt_names.push(SanType::URI(
                uri.clone()
                    .try_into()
                    .map_err(|_| CertsError::Dns(uri.clone()))?,
            ));
            identity.to_string()
        }
        Subject::Host(name) => name.clone(),
    };
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    for name in &request.dns {
        let san = name
            .clone()
            .try_into()
            .map_err(|_| CertsError::Dns(name.clone()))?;
        params.subject_alt_names.push(SanType::DnsName(san));
    }
    for ip in &request.ips {
        params.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Every identity is both: SMS and nodes serve and call, admins call.
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + Duration::days(i64::from(request.days));
    // A random serial, printed so the certificate can be revoked alone.
    let mut serial = [0u8; 16];
    aws_lc_rs::rand::SecureRandom::fill(&aws_lc_rs::rand::SystemRandom::new(), &mut serial)
        .map_err(|_| CertsError::Random)?;
    serial[0] = (serial[0] & 0x7f) | 0x40; // positive, and no leading zero byte
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
    Ok((params, serial))
}

/// A certificate for node `node_id` (its URI SAN only, whatever the
/// request asks) over the key of `csr_pem`, whose signature proves the
/// node holds it: what a node's join over TLS receives (docs/security.md,
/// "Node credentials"). Returns the PEM and the serial in hex.
pub fn sign_node(
    dir: &Path,
    node_id: &str,
    csr_pem: &str,
    days: u32,
) -> Result<(String, String), CertsError> {
    spear_identity::spiffe::check_name(node_id)?;
    let domain = TrustDomain::new(read(&dir.join(DOMAIN_FILE))?.trim())?;
    let bad_ca = |cause: rcgen::Error| CertsError::BadCa {
        dir: dir.to_path_buf(),
        cause: cause.to_string(),
    };
    let issuer = load_issuer(dir, bad_ca)?;
    let csr = rcgen::CertificateSigningRequestParams::from_pem(csr_pem)
        .map_err(|e| CertsError::BadRequest(e.to_string()))?;
    let request = Request {
        subject: Subject::Identity(Identity::Node(node_id.to_string())),
        dns: Vec::new(),
        ips: Vec::new(),
        days,
    };
    let (params, serial) = leaf_params(&domain, &request)?;
    let cert = params.signed_by(&csr.public_key, &issuer)?;
    Ok((cert.pem(), spear_identity::revoked::serial_hex(&serial)))
}

fn read(path: &Path) -> Result<String, CertsError> {
    std::fs::read_to_string(path).map_err(|cause| CertsError::Read {
        path: path.to_path_buf(),
        cause,
    })
}

/// Writes `text` to a temporary file beside `path` and renames it into
/// place; `secret` files are created 0600.
fn write(path: &Path, text: &str, secret: bool) -> Result<(), CertsError> {
    let failed = |cause| CertsError::Write {
        path: path.to_path_buf(),
        cause,
    };
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    options.mode(if secret { 0o600 } else { 0o644 });
    let mut file = options.open(&tmp).map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(failed)
}
