//! Which nodes a server is for (its `nodes`: node-id globs, none meaning
//! every node). Part of the contract: SMS validates the globs and refuses a
//! scoped server's literal secrets, gives OAuth tokens only to nodes in
//! scope; each node disables the servers that are not for it.

use crate::patterns::glob_match;
use crate::v1::ServerSpec;

/// Whether `spec` is for the node `node_id`.
pub fn in_scope(spec: &ServerSpec, node_id: &str) -> bool {
    spec.nodes.is_empty() || spec.nodes.iter().any(|glob| glob_match(glob, node_id))
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
