//! Which environment variables `${NAME}` references may read.

use super::PolicyError;

/// Variables no policy can open: the node's own settings, and the `sms`
/// CLI's (an admin token may sit in the same environment).
const NEVER_PREFIXES: [&str; 2] = ["SPEARLET_", "SMS_"];

/// Why a reference may not read a variable: the setting that refused it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Allowed names and prefixes, minus the node's own variables.
#[derive(Debug, Clone, Default)]
pub struct EnvPolicy {
    names: Vec<String>,
    prefixes: Vec<String>,
    own: Vec<String>,
}

impl EnvPolicy {
    pub fn build(entries: &[String], own: Vec<String>) -> Result<EnvPolicy, PolicyError> {
        let mut policy = EnvPolicy {
            own,
            ..EnvPolicy::default()
        };
        for entry in entries {
            let (name, prefix) = match entry.strip_suffix('*') {
                Some(prefix) => (prefix, true),
                None => (entry.as_str(), false),
            };
            let valid = if prefix {
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            } else {
                spear_proto::refs::is_env_name(name)
            };
            if !valid || (prefix && name.is_empty()) {
                return Err(PolicyError {
                    setting: "env".into(),
                    why: format!("'{entry}' is not a variable name or a prefix ending in '*' (a bare '*' would open the node's whole environment; list names instead)"),
                });
            }
            if prefix {
                policy.prefixes.push(name.to_string());
            } else {
                policy.names.push(name.to_string());
            }
        }
        Ok(policy)
    }

    /// No variable at all.
    pub fn none() -> EnvPolicy {
        EnvPolicy::default()
    }

    /// May a reference read `name`? The refusal says which setting refused.
    pub fn check(&self, name: &str) -> Result<(), Refused> {
        if let Some(prefix) = NEVER_PREFIXES.iter().find(|p| name.starts_with(*p)) {
            return Err(Refused(format!(
                "{prefix}* variables are the node's own settings and are never readable"
            )));
        }
        if self.own.iter().any(|own| own == name) {
            return Err(Refused(
                "it holds a key of the node's own (an LLM backend's api_key_env) and is never readable".into(),
            ));
        }
        let allowed = self.names.iter().any(|n| n == name)
            || self.prefixes.iter().any(|p| name.starts_with(p.as_str()));
        if allowed {
            Ok(())
        } else {
            Err(Refused(
                "the node's policy.env does not list it; add it there to allow it".into(),
            ))
        }
    }

    /// Reads `name` from the node's environment if the policy allows it.
    pub fn lookup(&self, name: &str) -> Result<Option<String>, Refused> {
        self.check(name)?;
        Ok(std::env::var(name).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_prefixes_open_only_what_they_say() {
        let policy = EnvPolicy::build(
            &["FS_TOKEN".into(), "GITHUB_*".into(), "OPENAI_*".into()],
            vec!["OPENAI_API_KEY".into()],
        )
        .unwrap();
        assert!(policy.check("FS_TOKEN").is_ok());
        assert!(policy.check("GITHUB_TOKEN").is_ok());
        assert!(policy.check("FS_TOKEN_2").is_err());
        assert!(policy.check("HOME").is_err());
        // The node's own, whatever the policy says.
        let refused = policy.check("OPENAI_API_KEY").unwrap_err();
        assert!(refused.0.contains("api_key_env"), "{refused}");
        let open_all = EnvPolicy::build(&["SPEARLET_*".into()], vec![]).unwrap();
        assert!(open_all
            .check("SPEARLET_ADMIN_TOKEN")
            .unwrap_err()
            .0
            .contains("never"));
        assert!(open_all.check("SMS_ADMIN_TOKEN").is_err());
        assert!(EnvPolicy::build(&["*".into()], vec![]).is_err());
        assert!(EnvPolicy::build(&["A-B".into()], vec![]).is_err());
        assert!(EnvPolicy::none()
            .check("PATH")
            .unwrap_err()
            .0
            .contains("policy.env"));
    }
}
