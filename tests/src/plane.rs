//! What the suites that spread the plane over network namespaces share:
//! the places of namespaces, the node config they run with, and the
//! arguments that give SMS its etcd client certificate.

use std::path::{Path, PathBuf};

use crate::certs::TlsSet;
use crate::netns::{Netns, Place};
use crate::tasks::guest;

pub fn places(namespaces: &[Netns]) -> Vec<Place> {
    namespaces.iter().map(Netns::place).collect()
}

/// A node config in `work`: the replay model at `model_url`, the example
/// guests' modules, and `files` granted to tasks.
pub fn node_toml(work: &Path, model_url: &str, files: &Path) -> PathBuf {
    let guests = guest("fs-agent");
    let guests = guests.parent().unwrap_or(Path::new("/")).display();
    let path = work.join("node.toml");
    std::fs::write(
        &path,
        format!(
            "[llm]\ndefault = \"replay\"\n\n[llm.backends.replay]\nkind = \"openai\"\nbase_url = \"{model_url}\"\nmodel = \"recorded\"\n\n\
             [policy]\nmodules = [\"file://{guests}/\"]\n\n[[policy.dirs]]\npath = \"{}\"\n",
            files.display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    path
}

/// `sms serve` arguments that reach etcd with SMS's own certificate.
pub fn etcd_client_args(sms: &TlsSet) -> Vec<String> {
    vec![
        "--etcd-ca".to_string(),
        sms.ca.display().to_string(),
        "--etcd-cert".into(),
        sms.cert.display().to_string(),
        "--etcd-key".into(),
        sms.key.display().to_string(),
    ]
}
