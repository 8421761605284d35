//! The operator console: SMS's registry, nodes, tasks and trust
//! decisions in a browser. Entry point: [`Console::serve`].
//!
//! Server-rendered HTML (maud) with one small script for the live parts:
//! nothing to build with a JavaScript toolchain, nothing fetched from
//! anywhere but SMS, every value escaped as text. Each view reads SMS's own
//! gRPC services in process ([`Api`]), so it shows what the CLI shows.
//!
//! - `session.rs`: tokens exchanged for cookie sessions, roles, CSRF.
//! - `guard.rs`: the security headers and the sign-in check every page
//!   passes through.
//! - `live.rs`: server-sent events that tell pages what changed.
//! - `logins.rs`: OAuth logins started here, until the browser is back.
//! - `views/`: one file per section.
//!
//! The listener is loopback by default; it serves HTTPS with SMS's
//! certificate when SMS has TLS, and plaintext beyond loopback only with
//! `--insecure` (the same rule as SMS's gRPC port).

mod api;
mod guard;
mod live;
mod logins;
mod page;
mod session;
mod throttle;
mod views;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use spear_identity::{AdminToken, HttpListener, TlsIdentity, ViewerToken};
use tokio::net::TcpListener;
use tracing::{info, warn};

pub use api::{Api, CONSOLE_ADMIN};
pub use session::{Role, SESSION_TTL};

use crate::files::FileProblems;
use crate::nodes::NodeTable;
use crate::watch::Hub;
use session::Sessions;

/// The console's default address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7380";

/// How the console is served.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    pub listen: SocketAddr,
    /// SMS's certificate: the console is HTTPS.
    pub tls: Option<TlsIdentity>,
    /// Plaintext beyond loopback was asked for.
    pub insecure: bool,
    pub admin_token: AdminToken,
    pub viewer_token: ViewerToken,
    /// Where modules uploaded through the console are written, named by
    /// their SHA-256; nodes read them as `file://` URIs (their policy must
    /// allow the directory). Without it the console registers modules by
    /// URI only.
    pub module_dir: Option<PathBuf>,
}

/// What the console reads.
pub struct ConsoleDeps {
    pub api: Api,
    pub hub: Arc<Hub>,
    pub nodes: Arc<NodeTable>,
    pub problems: Arc<FileProblems>,
    /// SMS's OpenID issuer: people sign in there.
    pub oidc: Option<Arc<spear_identity::OidcVerifier>>,
}

/// Why the console could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("the console would serve plaintext beyond loopback on {0}; give SMS TLS (--tls-ca, --tls-cert, --tls-key), keep --console-listen on loopback, or pass --insecure on a network you trust")]
    Insecure(SocketAddr),
    #[error("cannot listen for the console on {addr}: {cause}")]
    Listen {
        addr: SocketAddr,
        cause: std::io::Error,
    },
}

/// Shared by every handler.
pub(crate) struct State {
    pub api: Api,
    pub hub: Arc<Hub>,
    pub nodes: Arc<NodeTable>,
    pub problems: Arc<FileProblems>,
    pub sessions: Sessions,
    /// Cookies are `Secure` (and `__Host-`) under TLS.
    pub tls: bool,
    pub module_dir: Option<PathBuf>,
    /// OAuth logins waiting for the browser to come back.
    pub logins: logins::Logins,
    /// People's sign-ins at the issuer, waiting for the browser.
    pub sign_ins_pending: logins::SignIns,
    /// Sign-ins at the issuer started per source address.
    pub sign_in_starts: throttle::SignIns,
    /// SMS's OpenID issuer, where people sign in; `None`: tokens only.
    pub oidc: Option<Arc<spear_identity::OidcVerifier>>,
    /// Wrong sign-ins per source address.
    pub sign_ins: throttle::SignIns,
}

pub(crate) type Shared = Arc<State>;

/// The console's HTTP listener.
pub struct Console;

impl Console {
    /// Binds the console and serves it in the background; returns the
    /// address bound, or `None` when no token can sign in (then the
    /// console is off, and the log says why).
    pub async fn serve(
        config: ConsoleConfig,
        deps: ConsoleDeps,
    ) -> Result<Option<SocketAddr>, ConsoleError> {
        let ConsoleConfig {
            listen,
            tls,
            insecure,
            admin_token,
            viewer_token,
            module_dir,
        } = config;
        let sessions = Sessions::new(admin_token, viewer_token);
        if !sessions.can_sign_in() && deps.oidc.is_none() {
            info!("console off: signing in needs --admin-token-file, --viewer-token-file or --oidc-issuer");
            return Ok(None);
        }
        if tls.is_none() && !listen.ip().is_loopback() && !insecure {
            return Err(ConsoleError::Insecure(listen));
        }
        if tls.is_none() && !listen.ip().is_loopback() {
            warn!(%listen, "the console serves plaintext beyond loopback (--insecure): tokens and cookies cross the network in clear");
        }
        let listen_error = |cause| ConsoleError::Listen {
            addr: listen,
            cause,
        };
        let listener = TcpListener::bind(listen).await.map_err(listen_error)?;
        let bound = listener.local_addr().map_err(listen_error)?;
        let state = Arc::new(State {
            api: deps.api,
            hub: deps.hub,
            nodes: deps.nodes,
            problems: deps.problems,
            sessions,
            tls: tls.is_some(),
            module_dir,
            logins: logins::Logins::default(),
            sign_ins_pending: logins::SignIns::default(),
            sign_in_starts: throttle::SignIns::default(),
            oidc: deps.oidc,
            sign_ins: throttle::SignIns::default(),
        });
        let listener = HttpListener::new(listener, tls).map_err(listen_error)?;
        let app = router(state);
        tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<spear_identity::Peer>();
            if let Err(error) = axum::serve(listener, app).await {
                warn!(%error, "console stopped");
            }
        });
        info!(console = %bound, "console serving");
        Ok(Some(bound))
    }
}

/// The largest sign-in body read: a token and a field name, with room.
/// Checked before a byte more is read, and before any session lookup.
pub const MAX_SIGN_IN: usize = 4 << 10;
/// The largest body of any other form (the register form's upload has
/// its own bound).
pub const MAX_FORM: usize = 64 << 10;

/// Every route; all but sign-in and the assets need a session.
fn router(state: Shared) -> Router {
    let signed_in = Router::new()
        .route("/", get(views::registry::list))
        .route("/servers/{id}", get(views::registry::server))
        .route("/nodes", get(views::nodes::list))
        .route("/nodes/{id}", get(views::nodes::node))
        .route(
            "/tasks",
            get(views::tasks::list).post(views::tasks::register).layer(
                axum::extract::DefaultBodyLimit::max(views::tasks::MAX_UPLOAD),
            ),
        )
        .route("/tasks/{id}", get(views::tasks::task))
        .route("/tasks/{id}/delete", post(views::tasks::delete))
        .route("/tasks/{id}/invoke", post(views::tasks::invoke))
        .route(
            "/explain",
            get(views::explain::form).post(views::explain::explain),
        )
        .route("/trust", get(views::trust::page))
        .route(
            "/trust/approvals/{id}",
            get(views::trust::approval).post(views::trust::decide),
        )
        .route(
            "/trust/pins/{server}",
            get(views::trust::diff).post(views::trust::approve_pins),
        )
        .route("/audit", get(views::audit::page))
        .route("/usage", get(views::usage::page))
        .route("/audit/verify", post(views::audit::verify))
        .route("/oauth", get(views::oauth::page))
        .route("/oauth/{server}/login", post(views::oauth::start))
        .route("/accounts", get(views::connections::page))
        .route(
            "/accounts/{server}/connect",
            post(views::connections::connect),
        )
        .route("/events", get(live::events))
        .route("/logout", post(views::signin::sign_out))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::signed_in,
        ));
    Router::new()
        .route(
            "/login",
            get(views::signin::form)
                .post(views::signin::sign_in)
                .layer(axum::extract::DefaultBodyLimit::max(MAX_SIGN_IN)),
        )
        // The authorization server sends the browser back here: a
        // cross-site navigation, without the session cookie; the pending
        // login's state is the credential (`logins.rs`).
        .route("/oauth/callback", get(views::oauth::callback))
        // A person's sign-in at the issuer: the same, matched by `state`.
        .route("/login/oidc", get(views::people::start))
        .route("/login/oidc/callback", get(views::people::callback))
        .route("/assets/console.css", get(guard::css))
        .route("/assets/console.js", get(guard::js))
        .merge(signed_in)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM))
        .layer(axum::middleware::from_fn(guard::headers))
        .with_state(state)
}
