//! Certificates for the TLS scenarios, issued in-process with the same code
//! as `sms certs`: SMS's, an admin's, and one per node identity
//! (`bench-K`), each loaded as the process it stands for would load it.

use spear_identity::Identity;
use spear_identity::{TlsFiles, TlsIdentity};
use spear_sms::certs::{init, issue, Request, Subject};
use spear_tests::certs::TlsSet;

pub struct BenchCerts {
    _dir: tempfile::TempDir,
    pub sms: TlsSet,
    pub admin: TlsSet,
    nodes: Vec<TlsIdentity>,
}

fn issue_set(dir: &std::path::Path, identity: Identity) -> TlsSet {
    let issued = issue(
        dir,
        &Request {
            subject: Subject::Identity(identity),
            dns: vec![],
            ips: vec![],
            days: 1,
        },
    )
    .unwrap_or_else(|e| panic!("issue: {e}"));
    TlsSet {
        ca: dir.join("ca.pem"),
        cert: issued.cert,
        key: issued.key,
    }
}

impl BenchCerts {
    /// A CA with SMS, admin and `nodes` node identities. Inside Tokio.
    pub fn new(nodes: usize) -> BenchCerts {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ca = dir.path().join("ca");
        init(&ca, "bench.spear").unwrap_or_else(|e| panic!("CA: {e}"));
        let sms = issue_set(&ca, Identity::Sms);
        let admin = issue_set(&ca, Identity::Admin("bench".into()));
        let nodes = (0..nodes)
            .map(|k| {
                let set = issue_set(&ca, Identity::Node(format!("bench-{k}")));
                // Loaded once: 10,000 identities each re-checking three
                // files a second would be 30,000 stat calls a second in
                // the bench nodes' process, which a real node (one
                // identity, its own machine) never pays.
                TlsIdentity::load_once(&TlsFiles {
                    ca: set.ca,
                    cert: set.cert,
                    key: set.key,
                })
                .unwrap_or_else(|e| panic!("load: {e}"))
            })
            .collect();
        BenchCerts {
            _dir: dir,
            sms,
            admin,
            nodes,
        }
    }

    /// Node identity `k` (`bench-K`).
    pub fn node(&self, k: usize) -> &TlsIdentity {
        &self.nodes[k]
    }

    pub fn sms_identity(&self) -> TlsIdentity {
        self.sms.identity().unwrap_or_else(|e| panic!("{e}"))
    }
}
