//! The allow-list of non-public ranges a process may reach (a node's
//! `policy.egress`, SMS's `--egress`), and the refusal that names the
//! setting to change.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::ranges::{classify, Range};

/// Where an allow-list is written, for the refusal's sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Setting {
    /// A node's `[policy] egress`.
    #[default]
    NodePolicy,
    /// SMS's `--egress` flag.
    SmsFlag,
}

impl Setting {
    fn rule(self) -> &'static str {
        match self {
            Setting::NodePolicy => "this node connects there only if its policy.egress lists",
            Setting::SmsFlag => "SMS connects there only if its --egress lists",
        }
    }
}

/// The allow-list, checked: every listed range, and where it was written.
#[derive(Debug, Clone, Default)]
pub struct EgressPolicy {
    allowed: Vec<IpNet>,
    setting: Setting,
}

/// An entry of an allow-list that is neither an address nor a range.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "'{entry}' is not an address or a range; write one such as \"10.0.0.0/8\" or \"127.0.0.1\""
)]
pub struct EgressError {
    pub entry: String,
}

/// An address refused.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{host} is a {range} address; {rule} a range holding it (for example \"{net}\")", rule = .setting.rule())]
pub struct EgressRefused {
    /// The host as written (a name, or the address itself).
    pub host: String,
    pub range: Range,
    /// The narrowest range that would allow it, for the sentence.
    pub net: IpNet,
    pub setting: Setting,
}

impl EgressPolicy {
    /// The node's `policy.egress` entries, checked.
    pub fn build(entries: &[String]) -> Result<EgressPolicy, EgressError> {
        let allowed = entries
            .iter()
            .map(|entry| {
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| EgressError {
                        entry: entry.clone(),
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(EgressPolicy {
            allowed,
            setting: Setting::NodePolicy,
        })
    }

    /// The same list, written as `setting` says.
    pub fn written_in(mut self, setting: Setting) -> EgressPolicy {
        self.setting = setting;
        self
    }

    /// Whether `ip` may be reached for `host`.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), EgressRefused> {
        let Some(range) = classify(ip) else {
            return Ok(());
        };
        if self.allowed.iter().any(|net| net.contains(&ip)) {
            return Ok(());
        }
        Err(EgressRefused {
            host: host.to_string(),
            range,
            net: IpNet::from(ip),
            setting: self.setting,
        })
    }
}
