//! What the launcher tells the node, once, before the server's program
//! runs: what is in force, or the one sentence saying why the server
//! could not be confined.

use serde::{Deserialize, Serialize};

/// A confinement feature and whether it holds for this server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feature {
    pub name: String,
    /// What holds ("ABI 7", "RLIMIT_NPROC 64"), or why it does not.
    pub detail: String,
    pub enforced: bool,
}

/// The launcher's one message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Set when the server was not started: why, in one sentence.
    pub refused: Option<String>,
    pub features: Vec<Feature>,
}

impl Report {
    pub fn refused(why: impl Into<String>) -> Report {
        Report {
            refused: Some(why.into()),
            features: Vec::new(),
        }
    }

    pub fn push(&mut self, name: &str, enforced: bool, detail: impl Into<String>) {
        self.features.push(Feature {
            name: name.to_string(),
            detail: detail.into(),
            enforced,
        });
    }

    /// A word for status views and heartbeats: `confined`, `partly
    /// confined` (a feature the node's policy accepts missing), `refused`.
    pub fn label(&self) -> &'static str {
        if self.refused.is_some() {
            "refused"
        } else if self.features.iter().all(|f| f.enforced) {
            "confined"
        } else {
            "partly confined"
        }
    }

    /// One line for logs and status: "confined (userns, mountns, …)" or
    /// what is missing.
    pub fn summary(&self) -> String {
        if let Some(why) = &self.refused {
            return format!("could not confine: {why}");
        }
        let held: Vec<&str> = self
            .features
            .iter()
            .filter(|f| f.enforced)
            .map(|f| f.name.as_str())
            .collect();
        let missing: Vec<String> = self
            .features
            .iter()
            .filter(|f| !f.enforced)
            .map(|f| format!("{} ({})", f.name, f.detail))
            .collect();
        if missing.is_empty() {
            format!("confined: {}", held.join(", "))
        } else {
            format!(
                "confined without {}: {}",
                missing.join(", "),
                held.join(", ")
            )
        }
    }
}
