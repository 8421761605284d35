//! Network namespaces for tests (root only): each process gets its own
//! network stack and address on a private bridge, so the plane is tested
//! across real interfaces, not loopback. The test process stays in the
//! root namespace, where the bridge has an address, and reaches them all.

use std::net::Ipv4Addr;
use std::process::Command;

/// A bridge in the root namespace with `10.77.N.1/24`.
pub struct Bridge {
    name: String,
    tag: String,
    subnet: u8,
    next_host: u8,
}

/// Where a process runs: a namespace and its address (cloneable, unlike
/// the [`Netns`] that owns them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub ns: String,
    pub ip: Ipv4Addr,
}

impl Place {
    /// `program` to be run inside this namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns]).arg(program);
        cmd
    }
}

/// A namespace with one address on the bridge; removed on drop.
pub struct Netns {
    pub name: String,
    pub ip: Ipv4Addr,
    veth: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run ip {args:?}: {e} (install iproute2)"));
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether this process may make namespaces (root, with iproute2).
pub fn available() -> bool {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .is_ok_and(|o| o.status.success())
        && std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

impl Bridge {
    pub fn new() -> Bridge {
        let tag = format!("{:05x}", rand::random::<u32>() & 0xf_ffff);
        let subnet = 10 + (rand::random::<u8>() % 240);
        let name = format!("spb{tag}");
        ip(&["link", "add", &name, "type", "bridge"]);
        ip(&["addr", "add", &format!("10.77.{subnet}.1/24"), "dev", &name]);
        ip(&["link", "set", &name, "up"]);
        Bridge {
            name,
            tag,
            subnet,
            next_host: 10,
        }
    }

    /// The bridge's own address (the root namespace's side).
    pub fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.subnet, 1)
    }

    /// A new namespace with the next address on the bridge.
    pub fn netns(&mut self) -> Netns {
        let host = self.next_host;
        self.next_host += 1;
        let name = format!("spn{}{host}", self.tag);
        let veth = format!("spv{}{host}", self.tag);
        let inner = format!("spi{}{host}", self.tag);
        let addr = Ipv4Addr::new(10, 77, self.subnet, host);
        ip(&["netns", "add", &name]);
        ip(&["link", "add", &veth, "type", "veth", "peer", "name", &inner]);
        ip(&["link", "set", &inner, "netns", &name]);
        ip(&["link", "set", &veth, "master", &self.name, "up"]);
        ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            &inner,
        ]);
        ip(&["-n", &name, "link", "set", &inner, "up"]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        Netns {
            name,
            ip: addr,
            veth,
        }
    }
}

impl Netns {
    pub fn place(&self) -> Place {
        Place {
            ns: self.name.clone(),
            ip: self.ip,
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.name])
            .output();
    }
}

impl Default for Bridge {
    fn default() -> Self {
        Self::new()
    }
}
