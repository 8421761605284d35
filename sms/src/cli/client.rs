//! Client commands against a running SMS.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use spear_common::safe_println;
use spear_common::text::printable;
use spear_identity::{dial, Identity, TlsFlags};
use spear_proto::v1::admin_client::AdminClient;
use spear_proto::v1::registry_client::RegistryClient;
use spear_proto::v1::status_client::StatusClient;
use spear_proto::v1::{
    DeleteServerRequest, ListServersRequest, StatusRequest, SyncState, Transport,
    UpsertServerRequest,
};
use tonic::transport::Channel;

use super::ClientArgs;

/// A channel to SMS for `args`.
pub(super) async fn connect_sms(args: &ClientArgs) -> Result<Channel> {
    if admin_token(args)?.is_some() {
        token_may_travel(args)?;
    }
    connect(args, &args.addr, Identity::Sms, "SMS").await
}

/// Connects to `addr` (host:port or a URL), which must be `expect` when
/// the connection is TLS; `what` names it in errors.
pub(super) async fn connect(
    args: &ClientArgs,
    addr: &str,
    expect: Identity,
    what: &str,
) -> Result<Channel> {
    let tls = TlsFlags {
        ca: args.tls_ca.clone(),
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
    }
    .client()?;
    let (endpoint, dialer) = dial(addr, tls.as_ref(), expect)?;
    let hint = if dialer.is_tls() {
        "is it running, and does its certificate chain to --tls-ca?"
    } else {
        "is it running? If it serves TLS, pass --tls-ca (and your --tls-cert and --tls-key)"
    };
    dialer.connect(endpoint).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot reach {what} at {addr}: {}; {hint}",
            spear_common::text::causes(&e)
        )
    })
}

/// A gRPC error as the one sentence it carries; a connection that broke
/// before any answer (most often: plaintext against a TLS port, or a
/// certificate the other side refused) says so and what to check.
pub(super) fn status_error(status: tonic::Status) -> anyhow::Error {
    use std::error::Error;
    // An answer from the server carries no source; a broken connection
    // (refused handshake, reset, protocol error) does.
    let transport = status.source().is_some();
    if status.message().starts_with("grpc-status header missing") {
        return anyhow::anyhow!(
            "the server at --addr answered plain HTTP, not gRPC ({}): point --addr at SMS's gRPC port (7300 by default), not its console (7380) or metrics (9300) port",
            status.message()
        );
    }
    if transport {
        anyhow::anyhow!(
            "the connection failed before an answer ({}); if the server serves TLS, pass --tls-ca (and your --tls-cert and --tls-key), and check that your certificate is from its CA",
            status.message()
        )
    } else {
        anyhow::anyhow!("{}", status.message())
    }
}

/// Refuses before anything is sent when the admin token would cross a
/// network in clear: plaintext (no --tls-ca) to an SMS beyond loopback,
/// without --insecure.
fn token_may_travel(args: &ClientArgs) -> Result<()> {
    let clear = args.tls_ca.is_none() && !spear_common::insecure::is_loopback(&args.addr);
    if clear && !args.insecure {
        anyhow::bail!(
            "refusing to send the admin token in clear to {}: pass --tls-ca so it travels over TLS (or --insecure if anyone on the path may read it)",
            args.addr
        );
    }
    Ok(())
}

/// The admin token, from --token-file or SMS_ADMIN_TOKEN, if any.
fn admin_token(args: &ClientArgs) -> Result<Option<String>> {
    if let Some(path) = &args.token_file {
        let token = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the token file {}", path.display()))?;
        return Ok(Some(token.trim().to_string()));
    }
    Ok(std::env::var("SMS_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty()))
}

/// A request to SMS, carrying the admin token when one is given. Only
/// ever sent to SMS: nodes never take tokens. Never in clear beyond
/// loopback, unless the user says `--insecure`.
pub(super) fn request<T>(args: &ClientArgs, body: T) -> Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(body);
    if let Some(token) = admin_token(args)? {
        token_may_travel(args)?;
        let value = format!("Bearer {token}")
            .parse()
            .context("the admin token contains characters not allowed in a header")?;
        request.metadata_mut().insert("authorization", value);
    }
    Ok(request)
}

pub async fn status(args: &ClientArgs) -> Result<()> {
    let mut client = StatusClient::new(connect_sms(args).await?);
    let status = client
        .get_status(request(args, StatusRequest::default())?)
        .await
        .map_err(status_error)?
        .into_inner();
    if args.json {
        let json = serde_json::json!({
            "epoch": status.epoch, "revision": status.revision, "servers": status.server_count,
            "store": status.store, "watch_streams": status.watch_streams, "insecure": status.insecure,
            "file_problems": status.file_problems.iter().map(|p| serde_json::json!({"file": p.file, "path": p.path, "message": p.message})).collect::<Vec<_>>(),
            "nodes": status.nodes.iter().map(|n| serde_json::json!({
                "node_id": n.node_id, "applied_epoch": n.applied_epoch, "applied_revision": n.applied_revision,
                "lag": n.lag, "sync_state": SyncState::label_of(n.sync_state), "alive": n.alive, "left": n.left, "last_seen_ms": n.last_seen_ms,
                "invoke_addr": n.invoke_addr, "running": n.running, "draining": n.draining,
                "problems": n.problems.iter().map(|p| serde_json::json!({"server_id": p.server_id, "message": p.message, "failed": p.failed})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        spear_common::terminal::print_json(&serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    if status.insecure {
        safe_println!("INSECURE: SMS serves plaintext beyond loopback (--insecure): anyone who can reach it can read registry secrets and act as a node; configure TLS (docs/security.md)");
    }
    safe_println!(
        "registry: epoch {} revision {} ({} servers, {} store, {} watch streams)",
        status.epoch,
        status.revision,
        status.server_count,
        status.store,
        status.watch_streams
    );
    if status.file_problems.is_empty() {
        safe_println!("files: no problems");
    } else {
        safe_println!("files: {} problems", status.file_problems.len());
        for p in &status.file_problems {
            let path = if p.path.is_empty() {
                String::new()
            } else {
                format!("{}: ", p.path)
            };
            safe_println!("  {}: {path}{}", printable(&p.file), printable(&p.message));
        }
    }
    safe_println!(
        "{:<32} {:>10} {:>8} {:<10} {:>6} {:>8}  INVOKE",
        "NODE",
        "REVISION",
        "LAG",
        "SYNC",
        "ALIVE",
        "RUNNING"
    );
    for n in &status.nodes {
        safe_println!(
            "{:<32} {:>10} {:>8} {:<10} {:>6} {:>8}  {}",
            printable(&n.node_id),
            n.applied_revision,
            n.lag,
            SyncState::label_of(n.sync_state),
            match (n.alive, n.left) {
                (true, _) => "true",
                (false, true) => "left",
                (false, false) => "false",
            },
            n.running,
            match (n.invoke_addr.is_empty(), n.draining) {
                (true, _) => "-".to_string(),
                (false, true) => format!("{} (draining)", printable(&n.invoke_addr)),
                (false, false) => printable(&n.invoke_addr).into_owned(),
            }
        );
        // Node-supplied text: escape sequences are shown, not obeyed.
        for p in &n.problems {
            safe_println!("  {}: {}", printable(&p.server_id), printable(&p.message));
        }
    }
    Ok(())
}

pub async fn servers(args: &ClientArgs) -> Result<()> {
    let mut client = RegistryClient::new(connect_sms(args).await?);
    let list = client
        .list_servers(request(args, ListServersRequest {})?)
        .await
        .map_err(status_error)?
        .into_inner();
    safe_println!("epoch {} revision {}", list.epoch, list.revision);
    safe_println!(
        "{:<32} {:<16} {:<8} {:<24} {:>10}  FROM",
        "ID",
        "TRANSPORT",
        "ENABLED",
        "SOURCE",
        "REVISION"
    );
    for record in &list.servers {
        let Some(spec) = &record.spec else { continue };
        let transport = Transport::label_of(spec.transport);
        let source = record.source_label();
        // A server from the official registry's server.json: its name,
        // version and what runs.
        let from = match &spec.registry {
            Some(r) => format!(
                "registry {} {}: {}",
                printable(&r.name),
                printable(&r.version),
                printable(&r.package)
            ),
            None => "-".to_string(),
        };
        safe_println!(
            "{:<32} {:<16} {:<8} {:<24} {:>10}  {from}",
            spec.id,
            transport,
            spec.enabled,
            source,
            record.mod_revision
        );
        // What a registry file makes a node run, exactly.
        if spec.registry.is_some() && !spec.command.is_empty() {
            safe_println!("  runs: {}", printable(&spec.command_line()));
        }
    }
    Ok(())
}

pub async fn apply(args: &ClientArgs, file: &Path) -> Result<()> {
    let mut json = String::new();
    if file == Path::new("-") {
        std::io::stdin()
            .read_to_string(&mut json)
            .context("cannot read standard input")?;
    } else {
        json = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
    }
    let mut client = AdminClient::new(connect_sms(args).await?);
    let response = client
        .upsert_server(request(args, UpsertServerRequest { spec_json: json })?)
        .await
        .map_err(status_error)?;
    safe_println!("applied at revision {}", response.into_inner().revision);
    Ok(())
}

pub async fn delete(args: &ClientArgs, id: &str) -> Result<()> {
    let mut client = AdminClient::new(connect_sms(args).await?);
    let response = client
        .delete_server(request(args, DeleteServerRequest { id: id.to_string() })?)
        .await
        .map_err(status_error)?;
    safe_println!("deleted at revision {}", response.into_inner().revision);
    Ok(())
}
