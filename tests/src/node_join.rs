//! An SMS whose nodes each join with their own token (`--join-token-file` holding its secret),
//! serving one sealed value for node-a only, and the join token an operator makes for a node.

use std::path::Path;

use serde_json::json;

use crate::procs::{SmsOptions, SmsProc};

/// The admin token SMS is started with.
pub const TOKEN: &str = "admin-token-0123456789abcdef";
/// SMS's own join secret: every node token is checked against it, and it
/// is no node's.
pub const SECRET: &str = "sms-join-secret-0123456789abcdef";
/// The sealed value only node-a may open (server `vault`'s `API_KEY`).
pub const SEALED: &str = "sk-live-for-node-a-only-0123";

/// An SMS on a plaintext port whose nodes join with their own tokens, its
/// files in `dir`.
pub fn sms(dir: &Path) -> SmsProc {
    let secret = dir.join("join-secret");
    std::fs::write(&secret, SECRET).unwrap_or_else(|e| panic!("{e}"));
    let mcp = dir.join("mcp.d");
    std::fs::create_dir_all(&mcp).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        mcp.join("vault.json"),
        json!({"id": "vault", "command": "/bin/true", "nodes": ["node-a"],
               "env": {"API_KEY": SEALED}})
        .to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    SmsProc::start(SmsOptions {
        admin_token: Some(TOKEN.into()),
        mcp_dir: Some(mcp),
        extra: vec!["--join-token-file".into(), secret.display().to_string()],
        ..Default::default()
    })
}

/// `sms nodes join-token NODE`, as an operator runs it.
pub fn join_token(sms: &SmsProc, node: &str) -> String {
    let (code, out, err) = sms.client_with_token(&["nodes", "join-token", node], Some(TOKEN));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("works once"), "{err}");
    out.trim().to_string()
}
