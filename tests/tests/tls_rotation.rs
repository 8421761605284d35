//! Rotation without restarts (issue 11): the CA bundle, a node's
//! certificate, SMS's certificate and the admin token file are replaced
//! while SMS and a node run. New connections use the new material, the
//! node's open watch stream is never dropped for it, and old credentials
//! stop working.

use std::path::{Path, PathBuf};
use std::time::Duration;

use spear_tests::certs::{Certs, TlsSet};
use spear_tests::fixtures::{stdio_server, write_file};
use spear_tests::history::converged;
use spear_tests::procs::{SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::eventually;

const SOON: Duration = Duration::from_secs(30);
const OLD_TOKEN: &str = "old-admin-token-0123456789";
const NEW_TOKEN: &str = "new-admin-token-9876543210";

/// Replaces `to` with `from`'s bytes by rename, as operators (and
/// Kubernetes) do.
fn replace(to: &Path, bytes: &[u8]) {
    let tmp = to.with_extension("new");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

/// A process's own copies of `set`, which the test rotates in place.
fn own_copy(set: &TlsSet, dir: &Path) -> TlsSet {
    std::fs::create_dir_all(dir).unwrap();
    let copy = |from: &PathBuf, name: &str| {
        let to = dir.join(name);
        std::fs::copy(from, &to).unwrap();
        to
    };
    TlsSet {
        ca: copy(&set.ca, "ca.pem"),
        cert: copy(&set.cert, "cert.pem"),
        key: copy(&set.key, "key.pem"),
    }
}

/// Puts `set`'s certificate and key in `into`'s files, key first.
fn rotate_to(into: &TlsSet, set: &TlsSet) {
    replace(&into.key, &std::fs::read(&set.key).unwrap());
    replace(&into.cert, &std::fs::read(&set.cert).unwrap());
}

#[test]
fn certificates_ca_bundles_and_the_token_rotate_while_the_cluster_runs() {
    let old = Certs::new("spear.test");
    let new = Certs::new("spear.test");
    let work = tempfile::tempdir().unwrap();
    let mcp = work.path().join("mcp.d");
    std::fs::create_dir_all(&mcp).unwrap();
    write_file(&mcp, "a.json", &stdio_server("a", "before"));

    let sms_files = own_copy(&old.sms(), &work.path().join("sms-tls"));
    let node_files = own_copy(&old.node("node-a"), &work.path().join("node-tls"));
    let mut sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(mcp.clone()),
        admin_token: Some(OLD_TOKEN.into()),
        tls: Some(sms_files.clone()),
        client_tls: Some(old.admin("ops")),
        ..Default::default()
    });
    let node = SpearletProc::start_with(
        "node-a",
        &sms.grpc,
        &work.path().join("node-a"),
        &node_files.args(),
    );
    converged(&sms, &node);
    let token_file = sms.workdir().join("admin-token");

    // The token: the new one works, the old one stops.
    replace(&token_file, NEW_TOKEN.as_bytes());
    sms.options.admin_token = Some(NEW_TOKEN.into());
    eventually("the old token to stop working", SOON, || {
        let (code, _, err) = sms.client_with_token(&["servers"], Some(OLD_TOKEN));
        if code != 0 && err.contains("token is wrong") {
            Ok(())
        } else {
            Err(format!("exit {code}: {err}"))
        }
    });
    let (code, _, err) = sms.client_with_token(&["servers"], Some(NEW_TOKEN));
    assert_eq!(code, 0, "{err}");

    // A new CA: first trusted beside the old one, then certificates from
    // it, then the old CA dropped.
    let both = [
        std::fs::read(old.ca()).unwrap(),
        std::fs::read(new.ca()).unwrap(),
    ]
    .concat();
    replace(&sms_files.ca, &both);
    replace(&node_files.ca, &both);
    rotate_to(&node_files, &new.node("node-a"));
    rotate_to(&sms_files, &new.sms());
    let new_admin = new.admin("ops");
    let new_only = TlsSet {
        ca: new.ca(),
        ..new_admin.clone()
    };
    eventually("SMS to present its new certificate", SOON, || {
        let out = sms.client_as(&["status"], &new_only.args());
        out.0.eq(&0).then_some(()).ok_or(out.1)
    });
    replace(&sms_files.ca, &std::fs::read(new.ca()).unwrap());
    replace(&node_files.ca, &std::fs::read(new.ca()).unwrap());
    let old_admin_new_trust = TlsSet {
        ca: new.ca(),
        ..old.admin("ops")
    };
    eventually("SMS to stop trusting the old CA", SOON, || {
        let (code, text) = sms.client_as(&["status"], &old_admin_new_trust.args());
        if code != 0 {
            Ok(())
        } else {
            Err(text)
        }
    });

    sms.options.client_tls = Some(new_admin);

    // The node's watch stream, made with the old certificate, was never
    // dropped for any of it: it still carries changes, with no reconnect.
    let before = reconnects(&node);
    write_file(&mcp, "b.json", &stdio_server("b", "during"));
    converged(&sms, &node);
    assert_eq!(reconnects(&node), before, "the stream was dropped");

    // A new connection from the node uses its new certificate: after SMS
    // restarts (now trusting only the new CA), the node is back in sync.
    let sms = sms.restart();
    write_file(&mcp, "c.json", &stdio_server("c", "after"));
    converged(&sms, &node);
}

fn reconnects(node: &SpearletProc) -> f64 {
    spear_tests::http::metric(&node.http, "spearlet_sync_reconnects_total").unwrap()
}
