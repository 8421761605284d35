//! The names a virtual server gives its tools (docs/virtual-servers.md):
//! `<server>__<tool>`, or the operator's alias, always within
//! [`MAX_NAME_LEN`] characters of `[A-Za-z0-9_-]` (what every model
//! provider's function names accept).
//!
//! A name depends only on its server's id and its tool's upstream name
//! ([`exposed_name`]), never on what else the virtual server offers, so
//! adding a server leaves every existing name as it was. Part of the
//! contract: SMS and nodes both serve virtual servers and must name each
//! tool alike. Entry point: [`Names`], which also refuses the names two
//! tools would share.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// Longest exposed name.
pub const MAX_NAME_LEN: usize = 64;

/// Between the server's id and the tool's name.
pub const SEPARATOR: &str = "__";

/// Hex digits of the hash suffix a name gets when `<server>__<tool>`
/// does not fit or holds other characters.
const HASH_DIGITS: usize = 8;

/// Whether `name` may be offered as it is: 1 to [`MAX_NAME_LEN`]
/// characters of `[A-Za-z0-9_-]`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `<server>__<tool>` when that is a valid name; otherwise its valid
/// characters (others become `_`), cut to fit, and `-` with the first
/// eight hex digits of SHA-256 over server id, NUL and tool name, so
/// two tools that differ only past the cut, or only in characters a name
/// cannot hold, still differ.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let plain = format!("{server}{SEPARATOR}{tool}");
    if is_valid_name(&plain) {
        return plain;
    }
    let digest = Sha256::new()
        .chain_update(server)
        .chain_update([0u8])
        .chain_update(tool)
        .finalize();
    let hash = hex::encode(&digest[..HASH_DIGITS / 2]);
    let kept: String = plain
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .take(MAX_NAME_LEN - HASH_DIGITS - 1)
        .collect();
    format!("{kept}-{hash}")
}

/// Why a tool is not offered under a name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Two tools would answer to one name: the first offered keeps it.
    #[error("{second} would be offered as '{name}', the name {first} already has; give one of them an alias")]
    Taken {
        name: String,
        first: String,
        second: String,
    },
    /// An alias that is not a valid name.
    #[error("the alias '{alias}' of {tool} is not 1 to {MAX_NAME_LEN} characters of letters, digits, '_' and '-'")]
    BadAlias { alias: String, tool: String },
}

/// The tools of one virtual server by exposed name, filled in the order
/// its servers are declared and, per server, in the server's order: an
/// earlier tool keeps a name, so no server added later (or a hostile one
/// naming its tool after another's) can take a tool away from another.
#[derive(Debug, Default, Clone)]
pub struct Names {
    /// Exposed name → (server id, upstream tool name).
    by_name: BTreeMap<String, (String, String)>,
}

impl Names {
    pub fn new() -> Self {
        Self::default()
    }

    /// Names `tool` of `server`, with its alias if the operator gave one;
    /// the name, or why the tool cannot have one.
    pub fn add(
        &mut self,
        server: &str,
        tool: &str,
        alias: Option<&str>,
    ) -> Result<String, NameError> {
        let name = match alias {
            Some(alias) if is_valid_name(alias) => alias.to_string(),
            Some(alias) => {
                return Err(NameError::BadAlias {
                    alias: alias
                        .chars()
                        .take(128)
                        .flat_map(char::escape_default)
                        .collect(),
                    tool: describe(server, tool),
                })
            }
            None => exposed_name(server, tool),
        };
        if let Some((first_server, first_tool)) = self.by_name.get(&name) {
            return Err(NameError::Taken {
                name,
                first: describe(first_server, first_tool),
                second: describe(server, tool),
            });
        }
        self.by_name
            .insert(name.clone(), (server.to_string(), tool.to_string()));
        Ok(name)
    }

    /// The server and upstream tool an exposed name stands for.
    pub fn resolve(&self, name: &str) -> Option<(&str, &str)> {
        self.by_name
            .get(name)
            .map(|(server, tool)| (server.as_str(), tool.as_str()))
    }

    /// How many tools have a name.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// `tool 'x' of server 'y'`, the tool's name cut and escaped: it is the
/// upstream server's text and goes into sentences.
fn describe(server: &str, tool: &str) -> String {
    let tool: String = tool
        .chars()
        .take(128)
        .flat_map(char::escape_default)
        .collect();
    format!("tool '{tool}' of server '{server}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_name_is_server_and_tool() {
        assert_eq!(exposed_name("fs", "read_file"), "fs__read_file");
        assert_eq!(
            exposed_name("git-hub", "search-code"),
            "git-hub__search-code"
        );
    }

    #[test]
    fn a_long_or_foreign_name_keeps_what_fits_and_a_stable_hash() {
        let long = "t".repeat(100);
        let name = exposed_name("fs", &long);
        assert_eq!(name.len(), MAX_NAME_LEN);
        assert!(is_valid_name(&name), "{name}");
        assert_eq!(name, exposed_name("fs", &long), "the same every time");
        // Differing only past the cut, or in characters a name cannot hold.
        assert_ne!(name, exposed_name("fs", &format!("{long}x")));
        let dotted = exposed_name("fs", "files.read");
        assert!(is_valid_name(&dotted), "{dotted}");
        assert!(dotted.starts_with("fs__files_read-"), "{dotted}");
        assert_ne!(dotted, exposed_name("fs", "files/read"));
        assert_ne!(dotted, exposed_name("fs", "files_read"));
        let unicode = exposed_name("fs", "lire_fichier_é");
        assert!(is_valid_name(&unicode), "{unicode}");
    }

    #[test]
    fn adding_a_server_changes_no_existing_name() {
        let long = "x".repeat(80);
        let tools = [("fs", "read_file"), ("fs", long.as_str()), ("git", "log")];
        let mut before = Names::new();
        let named: Vec<String> = tools
            .iter()
            .map(|(s, t)| before.add(s, t, None).unwrap())
            .collect();
        let mut after = Names::new();
        after.add("search", "query", None).unwrap();
        for ((server, tool), name) in tools.iter().zip(&named) {
            assert_eq!(&after.add(server, tool, None).unwrap(), name);
        }
    }

    #[test]
    fn a_taken_name_stays_with_the_first_tool_and_the_refusal_names_both() {
        let mut names = Names::new();
        // Server ids may hold "__": "a" + "b__c" and "a__b" + "c" meet.
        assert_eq!(names.add("a", "b__c", None).unwrap(), "a__b__c");
        let refused = names.add("a__b", "c", None).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "tool 'c' of server 'a__b' would be offered as 'a__b__c', the name tool 'b__c' of server 'a' already has; give one of them an alias"
        );
        assert_eq!(names.resolve("a__b__c"), Some(("a", "b__c")));
        // An alias may take a name no tool has, and may not take one a tool has.
        assert_eq!(names.add("a__b", "c", Some("c_of_ab")).unwrap(), "c_of_ab");
        assert!(names.add("x", "y", Some("a__b__c")).is_err());
        assert_eq!(names.resolve("c_of_ab"), Some(("a__b", "c")));
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn an_alias_must_be_a_valid_name() {
        let mut names = Names::new();
        for bad in ["", "has space", "dot.ted", &"a".repeat(65), "\u{1b}[2J"] {
            let refused = names.add("fs", "read", Some(bad)).unwrap_err();
            assert!(matches!(refused, NameError::BadAlias { .. }), "{bad:?}");
            assert!(!refused.to_string().contains('\u{1b}'), "escaped");
        }
        assert!(names.is_empty());
    }
}
