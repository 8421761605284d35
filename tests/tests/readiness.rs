//! The probes on the real binaries (issue 13). SMS: `/livez` answers
//! whenever the process does; `/readyz` is 200 while its etcd answers and
//! its directory is loaded, 503 with the reason while etcd is stopped, and
//! 200 again once it is back. The node: `/readyz` is 503 before the node has
//! any registry, 200 once SMS's first snapshot is applied, and 503 again,
//! with the reason, once SMS has been unreachable past the stale bound.

use std::time::Duration;

use spear_tests::etcd::EtcdServer;
use spear_tests::http::{get, get_status as probe};
use spear_tests::procs::{SmsOptions, SmsProc, SpearletProc};
use spear_tests::wait::{eventually, free_port};

#[test]
fn readyz_follows_the_registry_and_the_stale_bound() {
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let sms_addr = format!("127.0.0.1:{port}");
    let args = vec!["--stale-after-secs".to_string(), "1".to_string()];
    let node = SpearletProc::start_with("node-r", &sms_addr, state.path(), &args);

    // No SMS yet: alive, not ready, and it says why.
    let (code, body) = probe(&node.http, "/livez").unwrap();
    assert_eq!((code, body.as_str()), (200, "ok\n"));
    let (code, body) = probe(&node.http, "/readyz").unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("no registry applied yet"), "{body}");

    // SMS comes up on the address the node knows: ready once it applied.
    let mut sms = SmsProc::start(SmsOptions {
        port: Some(port),
        ..Default::default()
    });
    eventually(
        "the node to be ready",
        Duration::from_secs(30),
        || match probe(&node.http, "/readyz")? {
            (200, body) if body == "ready\n" => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );

    // SMS gone: the node serves its registry, then stops answering ready
    // once the bound (1 s) is past.
    sms.proc.kill();
    let body = eventually(
        "the node to report stale",
        Duration::from_secs(30),
        || match probe(&node.http, "/readyz")? {
            (503, body) => Ok(body),
            other => Err(format!("{other:?}")),
        },
    );
    assert!(body.contains("past the 1s stale bound"), "{body}");
    assert_eq!(probe(&node.http, "/livez").unwrap().0, 200, "still alive");
    assert!(
        get(&node.http, "/registry").is_ok(),
        "still serving its registry"
    );
}

#[test]
fn sms_readyz_follows_its_store() {
    let mut etcd = EtcdServer::start();
    let dir = tempfile::tempdir().unwrap();
    let sms = SmsProc::start(SmsOptions {
        etcd: Some(etcd.endpoint()),
        mcp_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    });
    let ready = |sms: &SmsProc| {
        eventually("SMS to be ready", Duration::from_secs(30), || match probe(
            &sms.metrics,
            "/readyz",
        )? {
            (200, body) if body == "ready\n" => Ok(()),
            other => Err(format!("{other:?}")),
        })
    };
    ready(&sms);

    etcd.stop();
    let body = eventually(
        "SMS to report its store",
        Duration::from_secs(30),
        || match probe(&sms.metrics, "/readyz")? {
            (503, body) => Ok(body),
            other => Err(format!("{other:?}")),
        },
    );
    assert!(body.contains("the etcd store does not answer"), "{body}");
    assert_eq!(
        probe(&sms.metrics, "/livez").unwrap(),
        (200, "ok\n".to_string())
    );

    etcd.resume();
    ready(&sms);
}
