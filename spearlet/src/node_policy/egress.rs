//! Where the node may connect on behalf of server files and tasks: the
//! shared egress guard ([`spear_egress`]) with the node's `policy.egress`
//! as its allow-list. LLM backends are the operator's own configuration
//! and are not guarded.

pub use spear_egress::{classify, Egress, EgressPolicy, EgressRefused, EgressResolver, Range};
