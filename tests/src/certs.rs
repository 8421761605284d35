//! Certificates for tests, made the way operators make them: by running
//! `sms certs init` and `sms certs issue`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::procs::bin;

/// A CA directory made by `sms certs init`.
pub struct Certs {
    pub dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

/// One identity's files, as the `--tls-*` flags take them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSet {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsSet {
    /// The set loaded as a process would (inside Tokio).
    pub fn identity(&self) -> Result<spear_identity::TlsIdentity, String> {
        spear_identity::TlsIdentity::load(spear_identity::TlsFiles {
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
        })
        .map_err(|e| e.to_string())
    }

    /// `--tls-ca CA --tls-cert CERT --tls-key KEY`.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--tls-ca".into(),
            self.ca.display().to_string(),
            "--tls-cert".into(),
            self.cert.display().to_string(),
            "--tls-key".into(),
            self.key.display().to_string(),
        ]
    }
}

/// Runs `sms certs <args>`; panics with its output when it fails.
pub fn sms_certs(args: &[&str]) -> String {
    let out = Command::new(bin("sms"))
        .arg("certs")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run sms certs: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sms certs {args:?} failed: {text}");
    text
}

impl Certs {
    /// A new CA for `domain` in a temporary directory.
    pub fn new(domain: &str) -> Certs {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let dir = tmp.path().join("ca");
        Self::init_in(&dir, domain, Some(tmp))
    }

    /// A new CA for `domain` in `dir`.
    pub fn at(dir: &Path, domain: &str) -> Certs {
        Self::init_in(dir, domain, None)
    }

    fn init_in(dir: &Path, domain: &str, tmp: Option<tempfile::TempDir>) -> Certs {
        let shown = dir.display().to_string();
        sms_certs(&["init", &shown, "--trust-domain", domain]);
        Certs {
            dir: dir.to_path_buf(),
            _tmp: tmp,
        }
    }

    fn issue(&self, who: &str, name: &str, ips: &[IpAddr], stem: &str) -> TlsSet {
        let dir = self.dir.display().to_string();
        let mut args = vec!["issue".to_string(), dir, format!("--{who}"), name.into()];
        for ip in ips {
            args.extend(["--ip".to_string(), ip.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        sms_certs(&args);
        TlsSet {
            ca: self.dir.join("ca.pem"),
            cert: self.dir.join(format!("{stem}.pem")),
            key: self.dir.join(format!("{stem}.key")),
        }
    }

    pub fn sms(&self) -> TlsSet {
        self.issue("sms", "sms", &[], "sms")
    }

    pub fn node(&self, id: &str) -> TlsSet {
        self.issue("node", id, &[], &format!("node-{id}"))
    }

    pub fn admin(&self, name: &str) -> TlsSet {
        self.issue("admin", name, &[], &format!("admin-{name}"))
    }

    /// With IP SANs, for processes in their own network namespaces.
    pub fn sms_at(&self, ips: &[IpAddr]) -> TlsSet {
        self.issue("sms", "sms", ips, "sms")
    }

    /// A server certificate for a non-Spear host (etcd) at `ips`.
    pub fn host(&self, name: &str, ips: &[IpAddr]) -> TlsSet {
        self.issue("host", name, ips, &format!("host-{name}"))
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate for `uri` from this CA that expired yesterday (`sms
    /// certs` issues none: it refuses a validity in the past), as a clock
    /// gone by would leave one.
    pub fn expired(&self, uri: &str, stem: &str) -> TlsSet {
        let read = |name: &str| {
            std::fs::read_to_string(self.dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let ca_key = rcgen::KeyPair::from_pem(&read("ca.key")).unwrap_or_else(|e| panic!("{e}"));
        let issuer = rcgen::Issuer::from_ca_cert_pem(&read("ca.pem"), ca_key)
            .unwrap_or_else(|e| panic!("{e}"));
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let mut params = rcgen::CertificateParams::default();
        let uri = uri.try_into().unwrap_or_else(|e| panic!("{uri}: {e}"));
        params.subject_alt_names = vec![rcgen::SanType::URI(uri)];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(30);
        params.not_after = now - time::Duration::days(1);
        let cert = params
            .signed_by(&key, &issuer)
            .unwrap_or_else(|e| panic!("{e}"));
        let set = TlsSet {
            ca: self.ca(),
            cert: self.dir.join(format!("{stem}.pem")),
            key: self.dir.join(format!("{stem}.key")),
        };
        std::fs::write(&set.cert, cert.pem()).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&set.key, key.serialize_pem()).unwrap_or_else(|e| panic!("{e}"));
        set
    }
}
