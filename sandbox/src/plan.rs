//! What one server is given: the contract between the node, which
//! decides it, and the launcher, which makes it true.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Inside the sandbox the server's scratch directory is `/tmp` (a private
/// tmpfs) and its `HOME` is this directory in it.
pub const SCRATCH: &str = "/tmp";
pub const HOME: &str = "/tmp/home";

/// The confinement of one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The server's id, for messages.
    pub server: String,
    /// The program as an absolute path (resolved on `PATH` by the node).
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The working directory; `None`: the scratch `HOME`.
    pub cwd: Option<PathBuf>,
    /// Readable and executable trees: the system's shared files, the
    /// server's code and interpreter, what its file grants to read.
    pub read: Vec<PathBuf>,
    /// Readable and writable trees: directories its arguments name and
    /// what its file grants to write.
    pub write: Vec<PathBuf>,
    /// Paths hidden under an empty read-only mount: the node's state,
    /// config and keys, and the host's secrets, wherever a grant would
    /// otherwise reach them.
    pub mask: Vec<PathBuf>,
    /// The `host:port` destinations the server may reach, each through a
    /// listener inside its network namespace that the node forwards.
    pub forwards: Vec<Forward>,
    /// Bound on the server's data memory (RLIMIT_DATA), MiB.
    pub memory_mb: u64,
    /// Bound on processes and threads of the server (RLIMIT_NPROC).
    pub processes: u64,
    /// Size of the private scratch tmpfs, MiB.
    pub scratch_mb: u64,
    /// What must hold, or the server does not start.
    pub required: Required,
}

/// A declared destination and the address the server reaches it at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forward {
    /// As declared: a host name or an IPv4 address.
    pub host: String,
    pub port: u16,
    /// Where the listener is, inside the sandbox: the address itself for
    /// an IPv4 literal, else a loopback address the sandbox's `/etc/hosts`
    /// gives the name.
    pub listen: Ipv4Addr,
}

/// Which features a server may not start without. The default is every
/// one: a kernel that lacks one keeps the server from starting (with the
/// reason), unless the node's policy accepts less.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Required {
    pub landlock: bool,
    pub seccomp: bool,
}

impl Default for Required {
    fn default() -> Self {
        Required {
            landlock: true,
            seccomp: true,
        }
    }
}

/// The system's shared files every server reads: programs, libraries,
/// configuration (with the secrets in it masked, see [`HOST_SECRETS`]).
pub const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// Files of `/etc` no server reads: password hashes, host keys, TLS
/// private keys. Masked in every sandbox.
pub const HOST_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/spear",
];

/// Devices a server may open (read and write).
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The first loopback address given to named destinations.
pub const FIRST_NAMED: Ipv4Addr = Ipv4Addr::new(127, 0, 1, 1);

impl Plan {
    /// The `/etc/hosts` the sandbox sees: loopback, then each named
    /// destination at its listener address.
    pub fn hosts_file(&self) -> String {
        let mut text = String::from("127.0.0.1 localhost\n::1 localhost\n");
        let mut seen: Vec<&str> = Vec::new();
        for forward in &self.forwards {
            if forward.host.parse::<Ipv4Addr>().is_ok() || seen.contains(&forward.host.as_str()) {
                continue;
            }
            seen.push(&forward.host);
            text.push_str(&format!("{} {}\n", forward.listen, forward.host));
        }
        text
    }

    /// Gives each destination its listener address: a literal IPv4 keeps
    /// its own; each distinct name gets the next of 127.0.1.1, 127.0.1.2…
    pub fn assign_listeners(destinations: &[(String, u16)]) -> Vec<Forward> {
        let mut names: Vec<(&str, Ipv4Addr)> = Vec::new();
        let mut next = u32::from(FIRST_NAMED);
        destinations
            .iter()
            .map(|(host, port)| {
                let listen = match host.parse::<Ipv4Addr>() {
                    Ok(ip) => ip,
                    Err(_) => match names.iter().find(|(n, _)| n == host) {
                        Some((_, ip)) => *ip,
                        None => {
                            let ip = Ipv4Addr::from(next);
                            next += 1;
                            names.push((host, ip));
                            ip
                        }
                    },
                };
                Forward {
                    host: host.clone(),
                    port: *port,
                    listen,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_share_an_address_and_literals_keep_theirs() {
        let forwards = Plan::assign_listeners(&[
            ("api.example.com".into(), 443),
            ("127.0.0.1".into(), 8080),
            ("api.example.com".into(), 80),
            ("db.internal".into(), 5432),
        ]);
        let ips: Vec<_> = forwards.iter().map(|f| f.listen.to_string()).collect();
        assert_eq!(ips, ["127.0.1.1", "127.0.0.1", "127.0.1.1", "127.0.1.2"]);
        let plan = Plan {
            server: "s".into(),
            program: "/bin/true".into(),
            args: vec![],
            cwd: None,
            read: vec![],
            write: vec![],
            mask: vec![],
            forwards,
            memory_mb: 1,
            processes: 1,
            scratch_mb: 1,
            required: Required::default(),
        };
        let hosts = plan.hosts_file();
        assert!(hosts.contains("127.0.1.1 api.example.com\n"));
        assert!(hosts.contains("127.0.1.2 db.internal\n"));
        assert_eq!(hosts.matches("api.example.com").count(), 1);
        assert!(!hosts.contains("127.0.0.1 127.0.0.1"));
    }
}
