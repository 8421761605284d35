//! SMS on an etcd that requires TLS, client certificates and a user with a
//! password (issue 11): certificates from `sms certs`, the password from a
//! file. SMS serves the registry from it; a wrong password or a missing
//! client certificate stops SMS at start with a sentence, not a hang; and
//! rotated TLS material for etcd is followed without a restart.

use std::net::IpAddr;
use std::process::Command;

use spear_tests::certs::Certs;
use spear_tests::etcd::EtcdServer;
use spear_tests::fixtures::{stdio_server, write_file};
use spear_tests::history::converged;
use spear_tests::procs::{bin, SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::eventually;
use std::time::Duration;

const PASSWORD: &str = "etcd-password-for-spear";

fn etcd_with_auth(certs: &Certs) -> EtcdServer {
    let loopback: IpAddr = [127, 0, 0, 1].into();
    let etcd = EtcdServer::start_tls(certs.host("etcd", &[loopback]), certs.host("etcdctl", &[]));
    for args in [
        vec![
            "user",
            "add",
            "root",
            "--new-user-password=root-password-0123",
        ],
        vec![
            "user",
            "add",
            "spear",
            &format!("--new-user-password={PASSWORD}"),
        ],
        vec!["role", "add", "spear"],
        vec![
            "role",
            "grant-permission",
            "spear",
            "--prefix=true",
            "readwrite",
            "/spear",
        ],
        vec!["user", "grant-role", "spear", "spear"],
        vec!["auth", "enable"],
    ] {
        etcd.etcdctl(&args)
            .unwrap_or_else(|e| panic!("etcdctl {args:?}: {e}"));
    }
    etcd
}

#[test]
fn sms_uses_an_etcd_with_tls_client_certificates_and_a_password() {
    let certs = Certs::new("spear.test");
    let etcd = etcd_with_auth(&certs);
    let work = tempfile::tempdir().unwrap();
    let password = work.path().join("etcd-password");
    std::fs::write(&password, format!("{PASSWORD}\n")).unwrap();
    let mcp = work.path().join("mcp.d");
    std::fs::create_dir_all(&mcp).unwrap();
    write_file(&mcp, "a.json", &stdio_server("a", "in etcd"));
    let client = certs.sms();
    let etcd_args = |password_file: &str, with_cert: bool| {
        let mut args = vec![
            "--etcd-ca".to_string(),
            client.ca.display().to_string(),
            "--etcd-user".into(),
            "spear".into(),
            "--etcd-password-file".into(),
            password_file.into(),
        ];
        if with_cert {
            args.extend([
                "--etcd-cert".to_string(),
                client.cert.display().to_string(),
                "--etcd-key".into(),
                client.key.display().to_string(),
            ]);
        }
        args
    };

    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(mcp.clone()),
        etcd: Some(etcd.endpoint()),
        extra: etcd_args(&password.display().to_string(), true),
        ..Default::default()
    });
    let node = SpearletProc::start("node-1", &sms.grpc, &work.path().join("node-1"));
    converged(&sms, &node);
    let keys = etcd
        .etcdctl(&[
            "--user=root:root-password-0123",
            "get",
            "--prefix",
            "--keys-only",
            "/spear/",
        ])
        .unwrap();
    assert!(keys.contains("/spear/"), "{keys}");
    assert!(!sms.proc.log().contains(PASSWORD));

    // A wrong password, and no client certificate: SMS says why and exits.
    let wrong = work.path().join("wrong");
    std::fs::write(&wrong, "not-the-password").unwrap();
    for (args, expect) in [
        (
            etcd_args(&wrong.display().to_string(), true),
            "check --etcd-user and the password",
        ),
        (
            etcd_args(&password.display().to_string(), false),
            "give --etcd-cert and --etcd-key",
        ),
    ] {
        let out = Command::new(bin("sms"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "off",
            ])
            .args(["--etcd-endpoints", &etcd.endpoint()])
            .args(&args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}");
        assert!(text.contains(expect), "{text}");
        assert!(
            !text.contains(PASSWORD) && !text.contains("not-the-password"),
            "{text}"
        );
    }
}

/// etcd moves to certificates from a new CA; SMS's `--etcd-ca`,
/// `--etcd-cert` and `--etcd-key` files are rewritten with the new CA's,
/// as cert-manager would, and SMS goes on writing the registry to etcd
/// without a restart.
#[test]
fn sms_follows_rotated_etcd_tls_material_without_a_restart() {
    let loopback: IpAddr = [127, 0, 0, 1].into();
    let old = Certs::new("spear.test");
    let mut etcd = EtcdServer::start_tls(old.host("etcd", &[loopback]), old.host("etcdctl", &[]));
    let work = tempfile::tempdir().unwrap();
    // SMS's own copies of the files, replaced in place on rotation.
    let (ca, cert, key) = (
        work.path().join("etcd-ca.pem"),
        work.path().join("etcd-client.pem"),
        work.path().join("etcd-client.key"),
    );
    let install = |from: &spear_tests::certs::TlsSet| {
        for (src, dst) in [(&from.ca, &ca), (&from.cert, &cert), (&from.key, &key)] {
            let next = dst.with_extension("next");
            std::fs::copy(src, &next).unwrap();
            std::fs::rename(&next, dst).unwrap();
        }
    };
    install(&old.sms());
    let mcp = work.path().join("mcp.d");
    std::fs::create_dir_all(&mcp).unwrap();
    write_file(&mcp, "a.json", &stdio_server("a", "before"));
    let sms = SmsProc::start(SmsOptions {
        mcp_dir: Some(mcp.clone()),
        etcd: Some(etcd.endpoint()),
        extra: [
            ("--etcd-ca", &ca),
            ("--etcd-cert", &cert),
            ("--etcd-key", &key),
        ]
        .iter()
        .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
        .collect(),
        ..Default::default()
    });
    let node = SpearletProc::start("node-1", &sms.grpc, &work.path().join("node-1"));
    converged(&sms, &node);

    let new = Certs::new("spear.test");
    etcd.restart_with_tls(new.host("etcd", &[loopback]), new.host("etcdctl", &[]));
    install(&new.sms());
    write_file(&mcp, "b.json", &stdio_server("b", "after the rotation"));
    eventually(
        "the node to get a server SMS wrote to etcd after the rotation",
        Duration::from_secs(60),
        || {
            let registry = node.registry()?.to_string();
            registry
                .contains("after the rotation")
                .then_some(())
                .ok_or(registry)
        },
    );
    assert!(
        sms.proc
            .log()
            .contains("TLS material for etcd changed on disk and was reloaded"),
        "{}",
        sms.proc.log()
    );
}
