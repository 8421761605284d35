//! Who may call what: the authorization matrix of DESIGN §4, one method
//! per row, shared by SMS's services and the node's Invocation service.
//!
//! | call                                         | who                      |
//! |----------------------------------------------|--------------------------|
//! | registry list/watch, task get/list           | [`Access::reader`]: a node or an admin |
//! | heartbeat                                    | [`Access::node`]: that node            |
//! | registry writes, task writes, invoke via SMS, status | [`Access::admin`]: an admin    |
//! | a node's Invocation service                  | [`Access::runner`]: SMS or an admin    |
//! | an OAuth access token for a server           | [`Access::any_node`]: a node (SMS then checks the server is for it) |
//!
//! Before any of these, [`Access::admit`] (every port's [`Gate`]) looks at
//! a request's headers and connection only: a wrong token or a revoked
//! certificate is refused, and on a TLS port so is a caller with neither a
//! certificate of ours nor the token, before its body is read.
//!
//! An admin is a certificate for `spiffe://<domain>/admin/<name>` or, at
//! SMS only, the admin token. On a plaintext port (loopback, or
//! `--insecure`) nobody has an identity: everything is open except admin
//! calls when a token is set, which is how Spear ran among friends.

use tonic::{Request, Status};

use crate::gate::Gate;
use crate::incoming::Peer;
use crate::revoked::DenyList;
use crate::spiffe::Identity;
use crate::token::{AdminToken, Presented};

/// Who a request comes from, as far as this port can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A plaintext port: no identities.
    Anonymous,
    Sms,
    Node(String),
    /// An admin certificate, by name.
    Admin(String),
    /// The admin token.
    TokenAdmin,
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Anonymous => f.write_str("anonymous"),
            Caller::Sms => f.write_str("sms"),
            Caller::Node(id) => write!(f, "node/{id}"),
            Caller::Admin(name) => write!(f, "admin/{name}"),
            Caller::TokenAdmin => f.write_str("admin (token)"),
        }
    }
}

/// One port's rules: whether it is TLS, the admin token (SMS only) and
/// the revoked certificates.
#[derive(Debug, Clone)]
pub struct Access {
    secure: bool,
    token: AdminToken,
    deny: DenyList,
}

/// Calls anyone may make: the standard health check.
const OPEN_PREFIX: &str = "/grpc.health.v1.Health/";

const NEEDS_CERT: &str = "this port needs a client certificate from the installation's CA";

fn wrong_token() -> Status {
    Status::unauthenticated(
        "the admin token is wrong or no longer valid; use the one in SMS's --admin-token-file",
    )
}

impl Access {
    /// SMS's port: `secure` when it serves TLS.
    pub fn new(secure: bool, token: AdminToken) -> Self {
        Self {
            secure,
            token,
            deny: DenyList::default(),
        }
    }

    /// Refuses the certificates `deny` lists (shared: later changes to it
    /// apply at once).
    pub fn with_deny_list(mut self, deny: DenyList) -> Self {
        self.deny = deny;
        self
    }

    /// Resolves when the caller's certificate is revoked (never, when it
    /// showed none): long-lived streams end with it, so a revoked node
    /// loses its open watch as well as its next call.
    pub fn until_revoked<T>(
        &self,
        request: &Request<T>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let holder = request
            .extensions()
            .get::<Peer>()
            .and_then(|p| p.identity.clone().map(|i| (i, p.serial.clone())));
        let deny = self.deny.clone();
        let mut changes = deny.subscribe();
        async move {
            let Some((identity, serial)) = holder else {
                return std::future::pending().await;
            };
            loop {
                if deny.refuses(&identity, serial.as_deref()) {
                    return;
                }
                if changes.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }

    /// The layer that applies [`Access::admit`] before a body is read.
    pub fn gate(&self) -> Gate {
        Gate::new(self.clone())
    }

    /// The first look at a request, from its path, its connection and its
    /// `authorization` header alone: a wrong token or a revoked certificate
    /// is refused; on a TLS port so is a caller with neither a certificate
    /// of ours nor the admin token, except for the health check.
    pub fn admit(
        &self,
        path: &str,
        peer: Option<&Peer>,
        authorization: Option<&[u8]>,
    ) -> Result<(), Status> {
        if path.starts_with(OPEN_PREFIX) {
            return Ok(());
        }
        match self.token.presented_in(authorization) {
            Presented::Valid => return Ok(()),
            Presented::Wrong => return Err(wrong_token()),
            Presented::None => {}
        }
        match peer.and_then(|p| p.identity.as_ref().map(|i| (i, p.serial.as_deref()))) {
            Some((identity, serial)) if self.deny.refuses(identity, serial) => {
                Err(Status::unauthenticated(format!(
                    "the certificate for {identity} has been revoked; ask an admin for a new one"
                )))
            }
            Some(_) => Ok(()),
            None if !self.secure => Ok(()),
            None => {
                let call = path.trim_start_matches('/');
                let or_token = if self.token.is_set() {
                    " or the admin token"
                } else {
                    ""
                };
                Err(Status::unauthenticated(format!(
                    "{call} refused before it was read: {NEEDS_CERT}{or_token}"
                )))
            }
        }
    }

    /// Whether callers have identities here.
    pub fn is_secure(&self) -> bool {
        self.secure
    }

    fn identity<T>(request: &Request<T>) -> Option<Identity> {
        request
            .extensions()
            .get::<Peer>()
            .and_then(|p| p.identity.clone())
    }

    /// The caller as this port sees it, with the admin token taken into
    /// account; a wrong token is refused outright.
    pub fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        match self.token.presented(request) {
            Presented::Valid => return Ok(Caller::TokenAdmin),
            Presented::Wrong => return Err(wrong_token()),
            Presented::None => {}
        }
        Ok(match Self::identity(request) {
            None => Caller::Anonymous,
            Some(Identity::Sms) => Caller::Sms,
            Some(Identity::Node(id)) => Caller::Node(id),
            Some(Identity::Admin(name)) => Caller::Admin(name),
        })
    }

    /// Admin writes, task registration, invocation through SMS, status.
    pub fn admin<T>(&self, request: &Request<T>, call: &str) -> Result<Caller, Status> {
        let caller = self.caller(request)?;
        match &caller {
            Caller::Admin(_) | Caller::TokenAdmin => Ok(caller),
            Caller::Anonymous if !self.secure && !self.token.is_set() => Ok(caller),
            Caller::Anonymous if !self.secure => Err(Status::unauthenticated(format!(
                "{call} needs the admin token: pass `authorization: Bearer <token>` (the sms CLI reads SMS_ADMIN_TOKEN or --token-file)"
            ))),
            Caller::Anonymous => Err(Status::unauthenticated(format!(
                "{call} needs an admin certificate (spiffe://<domain>/admin/<name>) or the admin token; {NEEDS_CERT}"
            ))),
            other => Err(Status::permission_denied(format!(
                "{call} is for admins; the caller is {other}"
            ))),
        }
    }

    /// Registry list and watch, task reads: nodes and admins.
    pub fn reader<T>(&self, request: &Request<T>, call: &str) -> Result<Caller, Status> {
        let caller = self.caller(request)?;
        match &caller {
            Caller::Node(_) | Caller::Admin(_) | Caller::TokenAdmin => Ok(caller),
            Caller::Anonymous if !self.secure => Ok(caller),
            Caller::Anonymous => Err(Status::unauthenticated(format!(
                "{call} needs a node or admin certificate; {NEEDS_CERT}"
            ))),
            Caller::Sms => Err(Status::permission_denied(format!(
                "{call} is for nodes and admins; the caller is sms"
            ))),
        }
    }

    /// Calls a node makes about itself (heartbeat, watch): only that node.
    pub fn node<T>(&self, request: &Request<T>, node_id: &str, call: &str) -> Result<(), Status> {
        if !self.secure {
            return Ok(());
        }
        match self.caller(request)? {
            Caller::Node(id) if id == node_id => Ok(()),
            Caller::Node(id) => Err(Status::permission_denied(format!(
                "{call} for node '{node_id}' refused: the certificate is node/{id}; a node speaks only for itself"
            ))),
            Caller::Anonymous => Err(Status::unauthenticated(format!(
                "{call} needs the node's certificate (spiffe://<domain>/node/{node_id}); {NEEDS_CERT}"
            ))),
            other => Err(Status::permission_denied(format!(
                "{call} for node '{node_id}' is for that node only; the caller is {other}"
            ))),
        }
    }

    /// What only nodes use (an OAuth access token for an MCP server): any
    /// node's certificate; admins neither need nor get one. On a plaintext
    /// port, where nobody has an identity, it is as open as the registry.
    pub fn any_node<T>(&self, request: &Request<T>, call: &str) -> Result<Caller, Status> {
        if !self.secure {
            return Ok(Caller::Anonymous);
        }
        match Self::identity(request) {
            Some(Identity::Node(id)) => Ok(Caller::Node(id)),
            None => Err(Status::unauthenticated(format!(
                "{call} needs a node certificate; {NEEDS_CERT}"
            ))),
            Some(other) => Err(Status::permission_denied(format!(
                "{call} is for nodes only; the caller is {}",
                match other {
                    Identity::Sms => "sms".to_string(),
                    Identity::Admin(name) => format!("admin/{name}"),
                    Identity::Node(id) => format!("node/{id}"),
                }
            ))),
        }
    }

    /// A node's Invocation service: SMS, or an admin certificate for a
    /// direct run. Tokens are never accepted here: SMS does not send one.
    pub fn runner<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        if !self.secure {
            return Ok(Caller::Anonymous);
        }
        match Self::identity(request) {
            Some(Identity::Sms) => Ok(Caller::Sms),
            Some(Identity::Admin(name)) => Ok(Caller::Admin(name)),
            Some(Identity::Node(id)) => Err(Status::permission_denied(format!(
                "invocations come from SMS or an admin; the caller is node/{id}"
            ))),
            None => Err(Status::unauthenticated(format!(
                "invocations need SMS's or an admin's certificate; {NEEDS_CERT}"
            ))),
        }
    }
}
