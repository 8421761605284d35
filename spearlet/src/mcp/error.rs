//! [`McpError`]: why talking to an MCP server failed, one sentence each.
//! Its own file so that the transports (`http`, `sse`, `lifecycle`, ...)
//! depend on it and not on the client that uses them.

use std::time::Duration;

use crate::env_refs::ResolveError;

/// Why talking to a server failed. Messages never carry env or header values.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("{0}")]
    Egress(String),
    #[error("cannot start '{program}': {cause}")]
    Spawn {
        program: String,
        cause: std::io::Error,
    },
    /// The server was not started: its sandbox could not be had.
    #[error("not started: {0}")]
    Sandbox(String),
    #[error("the server did not complete the MCP handshake: {0}")]
    Initialize(String),
    #[error("{what} timed out after {after:?}")]
    Timeout { what: &'static str, after: Duration },
    #[error("the server connection is closed: the server exited or hung up (its stderr is in the node's log)")]
    Closed,
    /// The call's own answer stream ended before its result; the
    /// connection stays up.
    #[error("the server's answer ended before its result: it closed the call's stream, or sent more than the node reads on one (at most {} events and {} MiB: the node's log says which)", super::stream_budget::MAX_EVENTS, super::stream_budget::MAX_BYTES >> 20)]
    AnswerCut,
    /// One request's HTTP exchange failed; the connection stays up.
    #[error("the request failed: {0}")]
    Request(String),
    #[error("the server answered with an error: {0}")]
    Server(String),
    #[error(
        "the server declares no transport; give it a \"command\" (stdio) or a \"url\" (remote)"
    )]
    NoTransport,
    #[error("tools/list returned more than {0} pages; the rest were ignored")]
    TooManyPages(usize),
    /// The server's tool list passed its bound (`list_bound`).
    #[error("{0}")]
    ListRefused(String),
    #[error("{0}")]
    InvalidHeader(String),
    #[error("server '{0}' is not in this node's registry")]
    UnknownServer(String),
    /// The tool is listed, but not as pinned (see `connections::pins`).
    #[error("{0}")]
    Held(String),
    #[error("tool '{tool}' is not in the tool list of server '{server}'; a server whose tools are pinned is called only for tools it lists")]
    NotListed { server: String, tool: String },
    /// An error whose text held a value resolved from a `${NAME}`
    /// reference, with the value replaced by `<redacted>`.
    #[error("{0}")]
    Redacted(String),
    /// The server refused the request's credentials, or none could be had.
    #[error("{0}")]
    Auth(String),
    #[error("the server's file declares \"auth\" and {0}")]
    NoCredentials(&'static str),
    /// A person's run on a server that acts per principal, without the
    /// delegation that would get their token.
    #[error("server '{0}' acts for the person who invoked the run, and SMS delegated nothing to this run (SMS seals delegations with its sealing key: --oauth-key-file when it runs on etcd); no other token is used in their place")]
    NoDelegation(String),
    /// The server asked for input the northbound client gives itself: the
    /// call ends here and resumes with the client's retry (`way_back`).
    #[error(
        "the server asked for input; the MCP client that made the call answers it and retries"
    )]
    InputHandedBack,
    /// The server's own JSON-RPC error for a request relayed to it
    /// (`relay`), kept whole so a northbound client gets it as it was.
    #[error("the server refused the request: {}", .0.message)]
    Rpc(rmcp::ErrorData),
    #[error("cannot open the server's sealed values: {0}")]
    Sealed(String),
    #[error("the server failed ({last_error}); the next restart attempt is in {retry_in:.1?}")]
    Restarting {
        last_error: String,
        retry_in: Duration,
    },
}
