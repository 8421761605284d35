//! `sms serve` configuration: flags, then environment variables, then a TOML
//! file, then defaults, validated before anything starts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Deserialize;
use tracing::{info, warn};

use spear_common::{init_logging, shutdown_signal, Listen, LogFormat};

use crate::server::{Sms, SmsConfig, StoreConfig};
use crate::store::EtcdStoreConfig;
use crate::watch::HubConfig;
use spear_identity::{AdminToken, JoinToken, TlsFlags, TlsIdentity, ViewerToken};

#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// TOML configuration file; flags and environment variables override it.
    #[arg(long, env = "SMS_CONFIG")]
    pub config: Option<PathBuf>,
    /// gRPC listen address [default: 127.0.0.1:7300].
    #[arg(long, env = "SMS_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Prometheus metrics listen address [default: 127.0.0.1:9300]; "off" disables it.
    #[arg(long, env = "SMS_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Directory of MCP server files (*.json), watched for changes.
    #[arg(long, env = "SMS_MCP_DIR")]
    pub mcp_dir: Option<PathBuf>,
    /// etcd endpoints, comma separated; without them the registry is kept in memory.
    #[arg(long, env = "SMS_ETCD_ENDPOINTS", value_delimiter = ',')]
    pub etcd_endpoints: Option<Vec<String>>,
    /// Key prefix in etcd [default: /spear].
    #[arg(long, env = "SMS_ETCD_PREFIX")]
    pub etcd_prefix: Option<String>,
    /// PEM CA bundle for etcd's certificate: etcd over TLS.
    #[arg(long, env = "SMS_ETCD_CA")]
    pub etcd_ca: Option<PathBuf>,
    /// PEM client certificate for etcd (with --etcd-key).
    #[arg(long, env = "SMS_ETCD_CERT")]
    pub etcd_cert: Option<PathBuf>,
    /// PEM client key for etcd.
    #[arg(long, env = "SMS_ETCD_KEY")]
    pub etcd_key: Option<PathBuf>,
    /// etcd user name (password from --etcd-password-file or SMS_ETCD_PASSWORD).
    #[arg(long, env = "SMS_ETCD_USER")]
    pub etcd_user: Option<String>,
    /// File holding the etcd user's password.
    #[arg(long, env = "SMS_ETCD_PASSWORD_FILE")]
    pub etcd_password_file: Option<PathBuf>,
    /// File holding the admin token (`authorization: Bearer <token>`), an
    /// admin credential besides admin certificates; re-read when it changes.
    #[arg(long, env = "SMS_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// File holding SMS's join secret, never given to a node: each node's
    /// own token derives from it (`sms nodes join-token NODE`); re-read when
    /// it changes. Needed with --insecure.
    #[arg(long, env = "SMS_JOIN_TOKEN_FILE")]
    pub join_token_file: Option<PathBuf>,
    /// SMS's CA directory (`sms certs init`): with it, a node that joins
    /// over TLS with its join token gets its certificate from this CA.
    #[arg(long, env = "SMS_CA_DIR")]
    pub ca_dir: Option<PathBuf>,
    /// PEM CA bundle that node and admin certificates must chain to.
    #[arg(long, env = "SMS_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// SMS's PEM certificate (URI SAN spiffe://DOMAIN/sms); re-read when it changes.
    #[arg(long, env = "SMS_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// SMS's PEM private key.
    #[arg(long, env = "SMS_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// File holding the key OAuth credentials and server files' literal
    /// values are sealed with (make one with `sms oauth keygen FILE`);
    /// every replica needs the same key.
    #[arg(long, env = "SMS_OAUTH_KEY_FILE")]
    pub oauth_key_file: Option<PathBuf>,
    /// Serve plaintext on a non-loopback address (a network you trust).
    #[arg(long, env = "SMS_INSECURE")]
    pub insecure: bool,
    /// Milliseconds between progress messages on idle watch streams [default: 60000].
    #[arg(long, env = "SMS_PROGRESS_INTERVAL_MS")]
    pub progress_interval_ms: Option<u64>,
    /// Registry changes kept for resuming nodes [default: 10000].
    #[arg(long, env = "SMS_HISTORY_LEN")]
    pub history_len: Option<usize>,
    /// Log format: human or json [default: human].
    #[arg(long, env = "SMS_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// The operator console's listen address [default: 127.0.0.1:7380];
    /// "off" disables it. Signing in needs --admin-token-file (or
    /// --viewer-token-file); HTTPS when SMS has TLS.
    #[arg(long, env = "SMS_CONSOLE_LISTEN")]
    pub console_listen: Option<String>,
    /// File holding a read-only token for the console (viewers see every
    /// view and change nothing); re-read when it changes.
    #[arg(long, env = "SMS_VIEWER_TOKEN_FILE")]
    pub viewer_token_file: Option<PathBuf>,
    /// Directory modules uploaded through the console are written to
    /// (nodes must read it: their policy lists file:///DIR/).
    #[arg(long, env = "SMS_MODULE_DIR")]
    pub module_dir: Option<PathBuf>,
    /// Hours of the nodes' audit records SMS keeps [default: 168].
    #[arg(long, env = "SMS_AUDIT_RETENTION_HOURS")]
    pub audit_retention_hours: Option<u64>,
    /// The OpenID Connect issuer whose people and workloads may invoke
    /// tasks that list them in "invokers" (docs/identities.md); with
    /// --oidc-audience.
    #[arg(long, env = "SMS_OIDC_ISSUER", requires = "oidc_audience")]
    pub oidc_issuer: Option<String>,
    /// What the issuer's tokens must be for (the client id of ID tokens,
    /// or the resource of access tokens).
    #[arg(long, env = "SMS_OIDC_AUDIENCE")]
    pub oidc_audience: Option<String>,
    /// The token claim listing a subject's groups [default: groups].
    #[arg(long, env = "SMS_OIDC_GROUPS_CLAIM")]
    pub oidc_groups_claim: Option<String>,
    /// The URL authorization servers reach SMS's HTTP port
    /// (--metrics-listen) at, where it publishes the keys of its nodes'
    /// workload identity (`/.well-known/jwks.json`); needed by servers
    /// whose grant is token_exchange (docs/identities.md).
    #[arg(long, env = "SMS_WORKLOAD_ISSUER")]
    pub workload_issuer: Option<String>,
    /// A P-256 private key (PEM) to sign nodes' workload JWTs with, shared
    /// by every replica [default: a key for this process only].
    #[arg(long, env = "SMS_WORKLOAD_KEY_FILE", requires = "workload_issuer")]
    pub workload_key_file: Option<PathBuf>,
    /// Non-public addresses or ranges (comma separated, such as
    /// 10.0.0.0/8) SMS may reach when a protected server's OAuth metadata
    /// names them: its authorization server, metadata and token endpoints.
    /// Loopback, private, link-local and cloud metadata addresses are
    /// refused without an entry [default: none, public addresses only].
    #[arg(long, env = "SMS_EGRESS", value_delimiter = ',')]
    pub egress: Option<Vec<String>>,
    /// Write the bound addresses as JSON to this file once serving (for scripts and tests).
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
}

/// The TOML file's keys (the same names as the flags, with underscores).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    metrics_listen: Option<String>,
    mcp_dir: Option<PathBuf>,
    etcd_endpoints: Option<Vec<String>>,
    etcd_prefix: Option<String>,
    etcd_ca: Option<PathBuf>,
    etcd_cert: Option<PathBuf>,
    etcd_key: Option<PathBuf>,
    etcd_user: Option<String>,
    etcd_password_file: Option<PathBuf>,
    admin_token_file: Option<PathBuf>,
    join_token_file: Option<PathBuf>,
    ca_dir: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    oauth_key_file: Option<PathBuf>,
    #[serde(default)]
    insecure: bool,
    progress_interval_ms: Option<u64>,
    history_len: Option<usize>,
    log_format: Option<String>,
    audit_retention_hours: Option<u64>,
    console_listen: Option<String>,
    viewer_token_file: Option<PathBuf>,
    module_dir: Option<PathBuf>,
    oidc_issuer: Option<String>,
    oidc_audience: Option<String>,
    oidc_groups_claim: Option<String>,
    workload_issuer: Option<String>,
    workload_key_file: Option<PathBuf>,
    egress: Option<Vec<String>>,
}

fn read_file_config(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("config file {} is invalid", path.display()))
}

/// Merges flags/env over the file over defaults into an [`SmsConfig`].
/// Reads the TLS material and token file, so it runs inside Tokio.
fn resolve(args: &ServeArgs) -> Result<(SmsConfig, LogFormat)> {
    let file = match &args.config {
        Some(path) => read_file_config(path)?,
        None => FileConfig::default(),
    };
    let store = store_section(args, &file)?;
    let oidc = oidc_section(args, &file)?;
    let workload = workload_section(args, &file)?;
    let hub = hub_section(args, &file)?;
    let (console_listen, viewer_token, module_dir) = console_section(args, &file)?;
    let listen = args
        .listen
        .or(file.listen)
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 7300)));
    let metrics = args
        .metrics_listen
        .clone()
        .or(file.metrics_listen)
        .unwrap_or_else(|| "127.0.0.1:9300".to_string());
    let metrics_listen = metrics
        .parse::<Listen>()
        .map_err(|bad| anyhow!("--metrics-listen {bad}"))?
        .addr();
    let log_format = args
        .log_format
        .clone()
        .or(file.log_format)
        .map_or(Ok(LogFormat::Human), |format| format.parse())?;
    let tls = TlsFlags {
        ca: args.tls_ca.clone().or(file.tls_ca),
        cert: args.tls_cert.clone().or(file.tls_cert),
        key: args.tls_key.clone().or(file.tls_key),
    };
    let tls = tls.files()?.map(TlsIdentity::load).transpose()?;
    let admin_token = match args.admin_token_file.clone().or(file.admin_token_file) {
        Some(path) => AdminToken::from_file(path)?,
        None => AdminToken::none(),
    };
    let join_token = match args.join_token_file.clone().or(file.join_token_file) {
        Some(path) => JoinToken::from_file(path)?,
        None => JoinToken::none(),
    };
    let mut audit_retention = crate::audit::Retention::default();
    if let Some(hours) = args.audit_retention_hours.or(file.audit_retention_hours) {
        if hours == 0 {
            anyhow::bail!("--audit-retention-hours must be at least 1");
        }
        audit_retention.max_age = std::time::Duration::from_secs(hours.saturating_mul(3600));
    }
    let egress = args.egress.clone().or(file.egress).unwrap_or_default();
    let egress = spear_egress::EgressPolicy::build(&egress)
        .map_err(|e| anyhow!("--egress: {e}"))?
        .written_in(spear_egress::Setting::SmsFlag);
    let config = SmsConfig {
        egress,
        listen,
        metrics_listen,
        mcp_dir: args.mcp_dir.clone().or(file.mcp_dir),
        store,
        admin_token,
        join_token,
        ca_dir: args.ca_dir.clone().or(file.ca_dir),
        tls,
        insecure: args.insecure || file.insecure,
        max_watches_per_node: crate::grpc::MAX_WATCHES_PER_NODE,
        hub,
        oauth_key_file: args.oauth_key_file.clone().or(file.oauth_key_file),
        audit_retention,
        console_listen,
        viewer_token,
        module_dir,
        oidc,
        workload,
    };
    Ok((config, log_format))
}

/// Where SMS's workload identity is published and its key, if given.
fn workload_section(args: &ServeArgs, file: &FileConfig) -> Result<crate::server::WorkloadConfig> {
    let issuer = args
        .workload_issuer
        .clone()
        .or_else(|| file.workload_issuer.clone());
    if let Some(issuer) = &issuer {
        let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
            .iter()
            .any(|p| issuer.starts_with(p));
        if !(issuer.starts_with("https://") || loopback) {
            bail!("--workload-issuer {issuer}: authorization servers fetch SMS's keys from it, so it is an https:// URL (http:// only on loopback)");
        }
    }
    Ok(crate::server::WorkloadConfig {
        issuer,
        key_file: args
            .workload_key_file
            .clone()
            .or_else(|| file.workload_key_file.clone()),
    })
}

/// The OpenID Connect issuer people sign in at, if any.
fn oidc_section(args: &ServeArgs, file: &FileConfig) -> Result<Option<spear_identity::OidcConfig>> {
    let issuer = args
        .oidc_issuer
        .clone()
        .or_else(|| file.oidc_issuer.clone());
    let audience = args
        .oidc_audience
        .clone()
        .or_else(|| file.oidc_audience.clone());
    let (issuer, audience) = match (issuer, audience) {
        (None, None) => return Ok(None),
        (Some(issuer), Some(audience)) => (issuer, audience),
        (Some(_), None) => bail!("--oidc-issuer needs --oidc-audience: what the issuer's tokens must be for (the client id of ID tokens)"),
        (None, Some(_)) => bail!("--oidc-audience needs --oidc-issuer"),
    };
    let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| issuer.starts_with(p));
    if !(issuer.starts_with("https://") || loopback) {
        bail!("--oidc-issuer {issuer} is not an https:// URL (http:// only on loopback): its keys decide who may invoke tasks");
    }
    Ok(Some(spear_identity::OidcConfig {
        issuer,
        audience,
        groups_claim: args
            .oidc_groups_claim
            .clone()
            .or_else(|| file.oidc_groups_claim.clone())
            .unwrap_or_else(|| "groups".to_string()),
    }))
}

/// The registry store: in memory, or etcd when endpoints are given.
fn store_section(args: &ServeArgs, file: &FileConfig) -> Result<StoreConfig> {
    let endpoints: Vec<String> = args
        .etcd_endpoints
        .clone()
        .or_else(|| file.etcd_endpoints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect();
    if endpoints.is_empty() {
        return Ok(StoreConfig::Memory);
    }
    let pick = |flag: &Option<PathBuf>, in_file: &Option<PathBuf>| {
        flag.clone().or_else(|| in_file.clone())
    };
    Ok(StoreConfig::Etcd(EtcdStoreConfig {
        endpoints,
        prefix: args
            .etcd_prefix
            .clone()
            .or_else(|| file.etcd_prefix.clone())
            .unwrap_or_else(|| "/spear".to_string()),
        connect_timeout: Duration::from_secs(5),
        tls: super::etcd_flags::etcd_tls(
            pick(&args.etcd_ca, &file.etcd_ca),
            pick(&args.etcd_cert, &file.etcd_cert),
            pick(&args.etcd_key, &file.etcd_key),
        )?,
        user: super::etcd_flags::etcd_user(
            args.etcd_user.clone().or_else(|| file.etcd_user.clone()),
            pick(&args.etcd_password_file, &file.etcd_password_file),
        )?,
    }))
}

/// The watch hub: progress interval and history length.
fn hub_section(args: &ServeArgs, file: &FileConfig) -> Result<HubConfig> {
    let mut hub = HubConfig::default();
    if let Some(ms) = args.progress_interval_ms.or(file.progress_interval_ms) {
        if ms == 0 {
            bail!("--progress-interval-ms must be above 0");
        }
        hub.progress_interval = Duration::from_millis(ms);
    }
    if let Some(n) = args.history_len.or(file.history_len) {
        if n == 0 {
            bail!("--history-len must be above 0");
        }
        hub.history_len = n;
    }
    Ok(hub)
}

/// The console: where it listens, the viewer token, the module directory.
fn console_section(
    args: &ServeArgs,
    file: &FileConfig,
) -> Result<(Option<SocketAddr>, ViewerToken, Option<PathBuf>)> {
    let console = args
        .console_listen
        .clone()
        .or_else(|| file.console_listen.clone())
        .unwrap_or_else(|| crate::console::DEFAULT_LISTEN.to_string());
    let console_listen = console
        .parse::<Listen>()
        .map_err(|bad| anyhow!("--console-listen {bad}"))?
        .addr();
    let viewer_token = match args
        .viewer_token_file
        .clone()
        .or_else(|| file.viewer_token_file.clone())
    {
        Some(path) => ViewerToken::from_file(path)?,
        None => ViewerToken::none(),
    };
    let module_dir = match args.module_dir.clone().or_else(|| file.module_dir.clone()) {
        Some(dir) if dir.is_dir() => Some(dir.canonicalize().with_context(|| {
            format!("--module-dir {}: cannot resolve it", dir.display())
        })?),
        Some(dir) => bail!(
            "--module-dir {} is not a directory; create it (nodes must read it) or leave the flag out",
            dir.display()
        ),
        None => None,
    };
    Ok((console_listen, viewer_token, module_dir))
}

/// `path`, once it is seen to be readable now (SMS re-reads it later).
pub(super) fn readable(flag: &str, path: PathBuf) -> Result<PathBuf> {
    std::fs::File::open(&path)
        .with_context(|| format!("{flag} {}: cannot read it", path.display()))?;
    Ok(path)
}

/// Runs SMS until SIGINT or SIGTERM.
pub async fn serve(args: ServeArgs) -> Result<()> {
    let (config, log_format) = resolve(&args)?;
    init_logging(log_format, spear_common::Verbosity::Daemon)?;
    if config.tls.is_none() && !config.admin_token.is_set() && !config.listen.ip().is_loopback() {
        warn!(listen = %config.listen, "plaintext and no admin token: anyone who reaches this port can change the registry");
    }
    if config.mcp_dir.is_none() {
        info!("no --mcp-dir: servers come only from the admin API");
    }
    let sms = Sms::start(config).await?;
    if let Some(path) = &args.ready_file {
        let ready = serde_json::json!({
            "grpc": sms.grpc_addr.to_string(),
            "metrics": sms.metrics_addr.map(|a| a.to_string()),
            "console": sms.console_addr.map(|a| a.to_string()),
        });
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, ready.to_string())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    }
    info!(grpc = %sms.grpc_addr, metrics = ?sms.metrics_addr, console = ?sms.console_addr, "SMS serving");
    // SMS follows its files as they change (server directory, TLS
    // material, admin token); a SIGHUP, as `systemctl reload` sends, must
    // not stop it.
    #[cfg(unix)]
    if let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                info!("SIGHUP: nothing to reload by hand; SMS re-reads its server directory, TLS material and admin token file whenever they change");
            }
        });
    }
    sms.serve(shutdown_signal()).await?;
    info!("SMS stopped");
    spear_common::telemetry::shutdown();
    spear_common::audit_export::shutdown();
    Ok(())
}
