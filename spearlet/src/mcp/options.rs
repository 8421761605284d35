//! How a node holds its sessions beyond what a server's file says: its own
//! file, below both the client (`client.rs`) and what opens sealed values
//! (`sealed.rs`), which both read it.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::bearer::{Credentials, TokenSource};
use super::elicitation::ElicitationPolicy;
use crate::node_policy::Egress;

/// How a session is held beyond what the server file says: the
/// elicitation policy `spearlet mcp call --elicitation` chooses, and where
/// tokens for servers behind OAuth come from.
#[derive(Clone, Default)]
pub struct SessionOptions {
    /// Replaces the server's own elicitation policy.
    pub elicitation: Option<ElicitationPolicy>,
    /// Tokens for servers whose file declares `auth`; without them such a
    /// server is not connected.
    pub credentials: Option<Arc<dyn Credentials>>,
    /// The node's egress guard and the client that obeys it: HTTP servers
    /// are reached only at addresses the node policy allows. `None`
    /// (`spearlet mcp`): wherever the operator points it.
    pub egress: Option<(Egress, reqwest::Client)>,
    /// How stdio servers are confined (a node, `spearlet mcp`); `None`:
    /// they run as this process's user, unconfined (library callers).
    pub sandbox: Option<crate::sandbox::Sandboxing>,
    /// The tokens of this session, in place of the server's shared ones
    /// from `credentials`: one person's, on a server that acts per
    /// principal.
    pub tokens: Option<Arc<dyn TokenSource>>,
    /// Counts the server's requests refused past their bound
    /// (`server_requests`), over all its sessions: each server's slot
    /// gives its own.
    pub requests_refused: Arc<AtomicU64>,
    /// Declare sampling to servers: where northbound clients' calls run,
    /// so a server's request for a model can reach the client's
    /// (`way_back`). Off for guests alone: nothing would answer it.
    pub relay_sampling: bool,
}
