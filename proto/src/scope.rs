//! Which nodes a server is for (its `nodes`: node-id globs, none meaning
//! every node). Part of the contract: SMS validates the globs, sends a node
//! a server that is not for it only as a [`stub`], and opens sealed values
//! and gives OAuth tokens only to nodes in scope; each node disables the
//! servers that are not for it.

use crate::patterns::glob_match;
use crate::v1::ServerSpec;

/// Whether `spec` is for the node `node_id`.
pub fn in_scope(spec: &ServerSpec, node_id: &str) -> bool {
    spec.nodes.is_empty() || spec.nodes.iter().any(|glob| glob_match(glob, node_id))
}

/// What a node a server is not for receives of it: its id and scope, and
/// nothing of how to run it, so a node's registry names every server (ids
/// stay unique across the fleet) and holds only its own servers' details.
pub fn stub(spec: &ServerSpec) -> ServerSpec {
    ServerSpec {
        id: spec.id.clone(),
        transport: spec.transport,
        nodes: spec.nodes.clone(),
        enabled: false,
        ..ServerSpec::default()
    }
}

/// `spec` as a node it is not for keeps it: disabled (never connected nor
/// offered), without its environment or headers.
pub fn set_aside(spec: &mut ServerSpec) {
    spec.enabled = false;
    spec.env.clear();
    spec.headers.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_scope_is_every_node_and_globs_pick_the_rest() {
        let mut spec = ServerSpec::default();
        assert!(in_scope(&spec, "anything"));
        spec.nodes = vec!["gpu-*".into(), "node-a".into()];
        assert!(in_scope(&spec, "gpu-7"));
        assert!(in_scope(&spec, "node-a"));
        assert!(!in_scope(&spec, "node-b"));
        assert!(!in_scope(&spec, "gpu"));
    }
}
