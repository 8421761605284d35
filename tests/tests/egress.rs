//! The node's egress guard (issue 25), end to end on loopback only: under
//! the default policy a module URL and MCP server URLs whose host is a
//! loopback address, or a name resolving to one, are refused with a
//! sentence and never reached (each listener counts the connections it
//! gets); a `policy.egress` entry, put in force with SIGHUP, lets them
//! through. The classification of private, link-local, metadata and
//! unique-local ranges is unit-tested (`node_policy::egress`): no test
//! sends traffic off this machine, even with the guard broken.

use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use spear_tests::tasks::{
    cluster_opts, fs_task, guest, register, serve_dir, sha256_of, ClusterOptions,
};
use spear_tests::wait::eventually;

/// A listener that counts connections and answers nothing useful.
fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    (port, count)
}

/// Rewrites the cluster's "fs" server to `url` and waits for the node to
/// have it.
fn move_fs(c: &spear_tests::tasks::Cluster, url: &str) {
    let file = c.work.path().join("mcp.d").join("fs.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"fs": {"url": url}}}).to_string(),
    )
    .unwrap();
    eventually(
        "the node to have the moved server",
        Duration::from_secs(30),
        || {
            let registry = c.node.registry()?.to_string();
            registry.contains(url).then_some(()).ok_or(registry)
        },
    );
}

fn server_error(c: &spear_tests::tasks::Cluster, id: &str) -> String {
    let status = c.node.status().unwrap_or_default();
    status["mcp_servers"][id]["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn loopback_servers_and_modules_are_refused_until_the_policy_allows_them() {
    let c = cluster_opts(
        "egress",
        ClusterOptions {
            no_egress: true,
            ..Default::default()
        },
    );
    // The agent's own "fs" server, moved to loopback HTTP: by address, then
    // by a name that resolves to it. Each run makes the node connect it.
    let (by_ip, ip_hits) = counting_listener();
    let (by_name, name_hits) = counting_listener();
    let (code, _, err) = register(&c, "fs-agent", &guest("fs-agent"), &fs_task(), &[]);
    assert_eq!(code, 0, "{err}");
    let ip_url = format!("http://127.0.0.1:{by_ip}/mcp");
    let name_url = format!("http://localhost:{by_name}/mcp");
    for (url, host) in [(&ip_url, "127.0.0.1"), (&name_url, "localhost")] {
        move_fs(&c, url);
        let error = eventually(
            "the node to refuse the server",
            Duration::from_secs(30),
            || {
                let (_, out, err) = c.sms.client(&["invoke", "fs-agent"]);
                let error = server_error(&c, "fs");
                (error.contains(host))
                    .then_some(error.clone())
                    .ok_or(format!("{out}{err}\n{error}"))
            },
        );
        assert!(
            error.contains(&format!("{host} is a loopback address"))
                && error.contains("policy.egress"),
            "{host}: {error}"
        );
    }

    // A module served on loopback, which policy.modules allows.
    let web = c.work.path().join("web");
    std::fs::create_dir_all(&web).unwrap();
    // The agent with a custom section of its own: a digest the node has
    // not cached from the fs-agent task above.
    let mut module = std::fs::read(guest("fs-agent")).unwrap();
    module.extend_from_slice(&[0, 7, 6, b'e', b'g', b'r', b'e', b's', b's']);
    std::fs::write(web.join("agent.wasm"), module).unwrap();
    let (_server, port) = serve_dir(&c, &web);
    let sha = sha256_of(&web.join("agent.wasm"));
    let uri = format!("http://127.0.0.1:{port}/agent.wasm");
    let (code, _, err) = register(
        &c,
        "web-agent",
        Path::new(&uri),
        &fs_task(),
        &["--sha256", &sha],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = c.sms.client(&["invoke", "web-agent"]);
    assert_ne!(code, 0);
    assert!(err.contains("127.0.0.1 is a loopback address"), "{err}");
    let web_log = std::fs::read_to_string(c.work.path().join("web.log")).unwrap_or_default();
    assert!(
        !web_log.contains("GET /agent.wasm"),
        "the module was fetched: {web_log}"
    );
    assert_eq!(
        ip_hits.load(Ordering::SeqCst),
        0,
        "a refused server was reached"
    );
    assert_eq!(
        name_hits.load(Ordering::SeqCst),
        0,
        "a refused server was reached"
    );

    // The operator allows loopback: in force with SIGHUP, no restart.
    let toml = c.work.path().join("node.toml");
    let original = std::fs::read_to_string(&toml).unwrap();
    let allowed = original.replacen(
        "[policy]\n",
        "[policy]\negress = [\"127.0.0.0/8\", \"::1\"]\n",
        1,
    );
    assert_ne!(allowed, original);
    std::fs::write(&toml, allowed).unwrap();
    c.node.proc.signal("HUP");
    // The module is fetched now (its run then meets the counting
    // listener where "fs" is, which is no MCP server).
    eventually("the module to be fetched", Duration::from_secs(30), || {
        let (_, out, err) = c.sms.client(&["invoke", "web-agent"]);
        let web_log = std::fs::read_to_string(c.work.path().join("web.log")).unwrap_or_default();
        web_log
            .contains("GET /agent.wasm HTTP/1.1\" 200")
            .then_some(())
            .ok_or(format!("{out}{err}"))
    });
    for (url, hits) in [(&name_url, &name_hits), (&ip_url, &ip_hits)] {
        move_fs(&c, url);
        eventually("the server to be reached", Duration::from_secs(60), || {
            let _ = c.sms.client(&["invoke", "fs-agent"]);
            let n = hits.load(Ordering::SeqCst);
            (n > 0)
                .then_some(())
                .ok_or(format!("{url}: {n} connections"))
        });
    }
}
