//! Numbers SMS and nodes must agree on. Each side used to assume the
//! other's; they live here once, and each side's code names them.

use std::time::Duration;

/// A node sends a heartbeat this often.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

/// SMS reports a node lost (and stops routing to it) after this long
/// without a heartbeat: three missed heartbeats.
pub const NODE_TTL: Duration = Duration::from_secs(3 * HEARTBEAT_EVERY.as_secs());

/// A run's wall-clock limit when neither the task nor the node sets one.
pub const DEFAULT_WALL_MS: u64 = 60_000;

/// How long a node lets an invocation wait for a run slot before it
/// answers "busy".
pub const RUN_QUEUE_WAIT: Duration = Duration::from_secs(10);

/// The longest a run may take from an invocation's arrival to its answer:
/// the longest wall limit a task may set, the queue, and a minute to fetch
/// and compile the module. The invocation calls' deadline at SMS and nodes.
pub const RUN_ANSWER_WITHIN: Duration =
    Duration::from_millis(crate::task::MAX_WALL_MS + RUN_QUEUE_WAIT.as_millis() as u64 + 60_000);

/// How long an upload of a task (its module, up to
/// [`MAX_INVOKE_REQUEST_BYTES`]) may take on a slow link.
pub const REGISTER_TASK_WITHIN: Duration = Duration::from_secs(300);

/// How long a node's request for an OAuth access token may take: SMS may
/// wait for another replica's renewal.
pub const ACCESS_TOKEN_WITHIN: Duration = Duration::from_secs(90);

/// Largest invocation request a node accepts (an inline task spec and its
/// input).
pub const MAX_INVOKE_REQUEST_BYTES: usize = 32 << 20;

/// Largest invocation answer a node sends and SMS or a CLI accepts: the
/// captured output (stdout and stderr, each capped by the node) and the
/// tool-call trace.
pub const MAX_INVOKE_RESPONSE_BYTES: usize = 64 << 20;

/// Problems one heartbeat reports (the node sends at most these, SMS keeps
/// at most these), each text cut to [`MAX_HEARTBEAT_TEXT`] bytes.
pub const MAX_HEARTBEAT_PROBLEMS: usize = 256;
pub const MAX_HEARTBEAT_TEXT: usize = 1024;
/// The servers a heartbeat reports by state, first by id: each is a few
/// dozen bytes, so this stays far under [`MAX_HEARTBEAT_BYTES`].
pub const MAX_HEARTBEAT_SERVERS: usize = 2048;

/// Largest heartbeat SMS decodes: the problems above with room to spare.
pub const MAX_HEARTBEAT_BYTES: usize = 1 << 20;
