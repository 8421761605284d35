//! Tool names offered to a model.
//!
//! The name is `mcp__<b64(server_id)>__<b64(tool_name)>` (base64url, no
//! padding): it survives any characters a server uses in its tool names, fits
//! OpenAI's `^[A-Za-z0-9_-]{1,64}$`, and is the same on every node and in
//! every request. A name that would be longer than 64 characters becomes
//! `mcp_h_<b64(sha256(server_id NUL tool_name))>`, still deterministic, and it
//! can never equal a regular name (they differ at the fifth character).
//!
//! Because base64url itself contains `_`, a name is never split to find its
//! parts: [`OfferedTools`] remembers every name offered in one request and
//! resolves only those (or the compat form `mcp.<server_id>.<tool_name>` of
//! a tool offered in that request). A name the model invents resolves to
//! nothing.

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// OpenAI's limit on function names.
pub const MAX_NAME_LEN: usize = 64;

/// Both providers' rule for tool names, `^[a-zA-Z0-9_-]{1,64}$` (also
/// OpenAI's rule for a `json_schema` name).
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The name offered to a model for `tool` of `server_id`.
pub fn offered_name(server_id: &str, tool: &str) -> String {
    let name = format!(
        "mcp__{}__{}",
        URL_SAFE_NO_PAD.encode(server_id),
        URL_SAFE_NO_PAD.encode(tool)
    );
    if name.len() <= MAX_NAME_LEN {
        return name;
    }
    let mut hasher = Sha256::new();
    hasher.update(server_id.as_bytes());
    hasher.update([0u8]);
    hasher.update(tool.as_bytes());
    format!("mcp_h_{}", URL_SAFE_NO_PAD.encode(hasher.finalize()))
}

/// Why a name from the model does not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("tool '{0}' was not offered in this request; use one of the tools listed")]
    NotOffered(String),
}

/// One MCP tool: the server that has it and the server's own name for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolRef {
    pub server: String,
    pub tool: String,
}

/// The tools offered in one request, by the names the model sees.
#[derive(Debug, Default, Clone)]
pub struct OfferedTools {
    by_name: HashMap<String, ToolRef>,
}

impl OfferedTools {
    /// Offers `tool` of `server_id`; returns the name to give the model.
    pub fn offer(&mut self, server_id: &str, tool: &str) -> String {
        let name = offered_name(server_id, tool);
        self.offer_named(name.clone(), server_id, tool);
        name
    }

    /// Offers a tool whose name was computed (and cached) beforehand with
    /// [`offered_name`].
    pub fn offer_named(&mut self, name: String, server_id: &str, tool: &str) {
        self.by_name.insert(
            name,
            ToolRef {
                server: server_id.to_string(),
                tool: tool.to_string(),
            },
        );
    }

    /// The tool a name from the model stands for.
    pub fn resolve(&self, name: &str) -> Result<&ToolRef, ResolveError> {
        let offered = match self.by_name.get(name) {
            Some(pair) => Some(pair),
            // The compat form `mcp.<server_id>.<tool>`: server ids have no
            // '.', so the first one after the prefix ends the id.
            None => name
                .strip_prefix("mcp.")
                .and_then(|rest| rest.split_once('.'))
                .and_then(|(server, tool)| self.by_name.get(&offered_name(server, tool)))
                .filter(|found| name == format!("mcp.{}.{}", found.server, found.tool)),
        };
        offered.ok_or_else(|| ResolveError::NotOffered(printable(name)))
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// A model-supplied name, bounded and escaped for an error message.
fn printable(name: &str) -> String {
    name.chars()
        .take(128)
        .flat_map(char::escape_default)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn known_names_are_stable() {
        assert_eq!(offered_name("fs", "read_file"), "mcp__ZnM__cmVhZF9maWxl");
        let long = offered_name("fs", &"x".repeat(80));
        assert!(long.starts_with("mcp_h_") && valid(&long), "{long}");
        assert_eq!(long, offered_name("fs", &"x".repeat(80)));
    }

    #[test]
    fn invented_names_never_resolve() {
        let mut offered = OfferedTools::default();
        let name = offered.offer("fs", "read_file");
        let fs_read = ToolRef {
            server: "fs".into(),
            tool: "read_file".into(),
        };
        assert_eq!(offered.resolve(&name), Ok(&fs_read));
        assert_eq!(offered.resolve("mcp.fs.read_file"), Ok(&fs_read));
        for invented in [
            "mcp.fs.write_file",
            "mcp__ZnM__d3JpdGVfZmlsZQ",
            "read_file",
            "",
            "mcp.fs",
            "mcp__ZnM",
        ] {
            assert!(offered.resolve(invented).is_err(), "{invented}");
        }
    }

    proptest! {
        #[test]
        fn names_are_valid_and_resolve_back(server in "[a-z0-9][a-z0-9_-]{0,62}", tool in "\\PC{1,100}") {
            let mut offered = OfferedTools::default();
            let name = offered.offer(&server, &tool);
            prop_assert!(valid(&name), "{name}");
            let want = ToolRef { server: server.clone(), tool: tool.clone() };
            prop_assert_eq!(offered.resolve(&name), Ok(&want));
            let compat = format!("mcp.{server}.{tool}");
            prop_assert_eq!(offered.resolve(&compat), Ok(&want));
            prop_assert_eq!(offered_name(&server, &tool), name);
        }

        #[test]
        fn no_two_tools_share_a_name(
            pairs in proptest::collection::hash_set(("[a-z0-9][a-z0-9_-]{0,20}", "[A-Za-z0-9_./-]{1,40}"), 1..400)
        ) {
            let names: HashSet<String> = pairs.iter().map(|(s, t)| offered_name(s, t)).collect();
            prop_assert_eq!(names.len(), pairs.len());
        }

        #[test]
        fn a_name_resolves_only_to_what_was_offered(
            offered_pairs in proptest::collection::vec(("[a-z]{1,8}", "[a-z_.]{1,12}"), 1..20),
            pick in 0usize..20,
            mode in 0u8..4,
            noise in "\\PC{0,80}",
        ) {
            let mut offered = OfferedTools::default();
            let names: Vec<String> = offered_pairs.iter().map(|(s, t)| offered.offer(s, t)).collect();
            let (server, tool) = &offered_pairs[pick % offered_pairs.len()];
            // Probes near the offered names, not only random text.
            let probe = match mode {
                0 => noise.clone(),
                1 => offered_name(server, tool),
                2 => format!("mcp.{server}.{tool}"),
                _ => format!("{}{}", offered_name(server, tool), noise),
            };
            match offered.resolve(&probe) {
                Ok(ToolRef { server: s, tool: t }) => {
                    prop_assert!(offered_pairs.iter().any(|(ps, pt)| ps == s && pt == t));
                    let compat = format!("mcp.{s}.{t}");
                    prop_assert!(names.contains(&probe) || probe == compat, "{probe} resolved to {s}/{t}");
                }
                Err(_) => prop_assert!(mode == 0 || mode == 3, "an offered name did not resolve: {probe}"),
            }
        }
    }
}
