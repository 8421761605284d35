//! Who may call what: the matrix of docs/security.md, one method
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
//! `--insecure`) nobody has a certificate, so tokens stand in: the admin
//! token for admin calls, and each node's own token for what that node
//! does (heartbeat, watch, OAuth tokens; it names the node, as a
//! certificate would: `node_token.rs`) and, on a node, for SMS's
//! invocations.
//! A plaintext port without them is open, which only a loopback port may
//! be (`sms serve` and `spearlet` refuse `--insecure` without them).

use tonic::{Request, Status};

use crate::incoming::Peer;
use crate::node_token::NodeTokens;
use crate::revoked::DenyList;
use crate::spiffe::Identity;
use crate::token::{AdminToken, JoinToken, Presented};

mod admit;

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
    /// On a node's plaintext port: the node's own token, which only
    /// SMS (and the node) holds.
    Joined,
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Anonymous => f.write_str("anonymous"),
            Caller::Sms => f.write_str("sms"),
            Caller::Node(id) => write!(f, "node/{id}"),
            Caller::Admin(name) => write!(f, "admin/{name}"),
            Caller::TokenAdmin => f.write_str("admin (token)"),
            Caller::Joined => f.write_str("a holder of this node's token"),
        }
    }
}

/// One port's rules: whether it is TLS, the admin token (SMS only), the
/// node join token (plaintext ports) and the revoked certificates.
#[derive(Debug, Clone)]
pub struct Access {
    secure: bool,
    token: AdminToken,
    /// A node's port: its own token, which SMS presents.
    join: JoinToken,
    /// SMS's port: the secret every node's token is checked against.
    nodes: NodeTokens,
    deny: DenyList,
}

/// The metadata key a person's or workload's OpenID Connect token (ID or
/// access token) travels in, apart from `authorization`, which holds the
/// admin token: an admin service may invoke on a person's behalf.
pub const PRINCIPAL_TOKEN_HEADER: &str = "spear-principal-token";

const NEEDS_CERT: &str = "this port needs a client certificate from the installation's CA";

fn wrong_token() -> Status {
    Status::unauthenticated(
        "the admin token is wrong or no longer valid; use the one in SMS's --admin-token-file",
    )
}

fn wrong_join_token() -> Status {
    Status::unauthenticated(
        "the node token is wrong or no longer valid; SMS presents this node's own token (the one `sms nodes join-token` led to)",
    )
}

fn refused_node_token(why: &crate::node_token::TokenRefusal) -> Status {
    Status::unauthenticated(format!(
        "the node token is refused: {why}; give the node its own join token (`sms nodes join-token NODE`) with --join-token-file"
    ))
}

fn needs_join_token(call: &str) -> Status {
    Status::unauthenticated(format!(
        "{call} needs the node's own token on this plaintext port: make a join token with `sms nodes join-token NODE` and start the node with --join-token-file"
    ))
}

impl Access {
    /// SMS's port: `secure` when it serves TLS.
    pub fn new(secure: bool, token: AdminToken) -> Self {
        Self {
            secure,
            token,
            join: JoinToken::none(),
            nodes: NodeTokens::default(),
            deny: DenyList::default(),
        }
    }

    /// A node's plaintext port: SMS's invocations need the node's own
    /// token `join` (presented as `spear-join-token`). Ignored on a TLS
    /// port, where SMS is its certificate.
    pub fn with_join_token(mut self, join: JoinToken) -> Self {
        self.join = join;
        self
    }

    /// SMS's plaintext port: a node is the node its token names
    /// ([`NodeTokens`]). Ignored on a TLS port, where a node is its
    /// certificate.
    pub fn with_node_tokens(mut self, nodes: NodeTokens) -> Self {
        self.nodes = nodes;
        self
    }

    /// Whether callers on this plaintext port must say who they are.
    fn tokens_set(&self) -> bool {
        self.join.is_set() || self.nodes.is_set()
    }

    /// On SMS's plaintext port: the node a presented token names.
    fn plaintext_node(&self, join: Option<&[u8]>) -> Option<Result<String, Status>> {
        if self.secure || !self.nodes.is_set() {
            return None;
        }
        join.map(|presented| {
            let node = self
                .nodes
                .check_node_token(presented)
                .map_err(|why| refused_node_token(&why))?;
            if self.deny.refuses(&Identity::Node(node.clone()), None) {
                return Err(Status::unauthenticated(format!(
                    "node/{node} has been revoked; ask an admin for a new join token"
                )));
            }
            Ok(node)
        })
    }

    /// Refuses the certificates `deny` lists (shared: later changes to it
    /// apply at once).
    pub fn with_deny_list(mut self, deny: DenyList) -> Self {
        self.deny = deny;
        self
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
        if !self.secure {
            let header = request
                .metadata()
                .get(crate::token::JOIN_TOKEN_HEADER)
                .map(|v| v.as_encoded_bytes());
            if let Some(node) = self.plaintext_node(header) {
                return node.map(Caller::Node);
            }
            match self.join.presented(request) {
                Presented::Valid => return Ok(Caller::Joined),
                Presented::Wrong => return Err(wrong_join_token()),
                Presented::None => {}
            }
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
            Caller::Node(_) | Caller::Admin(_) | Caller::TokenAdmin | Caller::Joined => Ok(caller),
            Caller::Anonymous if !self.secure && !self.tokens_set() => Ok(caller),
            Caller::Anonymous if !self.secure => Err(needs_join_token(call)),
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
        if !self.secure && !self.nodes.is_set() {
            return self.joined(request, call).map(|_| ());
        }
        let credential = if self.secure { "certificate" } else { "token" };
        match self.caller(request)? {
            Caller::Node(id) if id == node_id => Ok(()),
            Caller::Node(id) => Err(Status::permission_denied(format!(
                "{call} for node '{node_id}' refused: the {credential} is node/{id}'s; a node speaks only for itself"
            ))),
            Caller::Anonymous if !self.secure => Err(needs_join_token(call)),
            Caller::Anonymous => Err(Status::unauthenticated(format!(
                "{call} needs the node's certificate (spiffe://<domain>/node/{node_id}); {NEEDS_CERT}"
            ))),
            other => Err(Status::permission_denied(format!(
                "{call} for node '{node_id}' is for that node only; the caller is {other}"
            ))),
        }
    }

    /// On a plaintext port: the join token when one is set (nobody has
    /// an identity, so it is the only thing that tells a node from a
    /// stranger), anyone when none is.
    fn joined<T>(&self, request: &Request<T>, call: &str) -> Result<Caller, Status> {
        match self.join.presented(request) {
            Presented::Valid => Ok(Caller::Joined),
            Presented::Wrong => Err(wrong_join_token()),
            Presented::None if self.join.is_set() => Err(needs_join_token(call)),
            Presented::None => Ok(Caller::Anonymous),
        }
    }

    /// What only nodes use (an OAuth access token for an MCP server): any
    /// node's certificate; admins neither need nor get one. On a plaintext
    /// port, the join token.
    pub fn any_node<T>(&self, request: &Request<T>, call: &str) -> Result<Caller, Status> {
        if !self.secure && !self.nodes.is_set() {
            return self.joined(request, call);
        }
        if !self.secure {
            return match self.caller(request)? {
                Caller::Node(id) => Ok(Caller::Node(id)),
                Caller::Anonymous => Err(needs_join_token(call)),
                other => Err(Status::permission_denied(format!(
                    "{call} is for nodes only; the caller is {other}"
                ))),
            };
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
            return self.joined(request, "an invocation");
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

#[cfg(test)]
mod tests;
