//! A real etcd for tests: started on free loopback ports with its own data
//! dir, killed (and waited for) on drop.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::certs::TlsSet;
use crate::wait::free_port;

/// A running `etcd` process.
pub struct EtcdServer {
    child: Option<Child>,
    data: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    log: PathBuf,
    /// With TLS: the server's certificate, and the client certificate
    /// etcdctl uses; clients must present certificates from the same CA.
    tls: Option<(TlsSet, TlsSet)>,
}

fn etcd_binary() -> PathBuf {
    for candidate in ["/usr/bin/etcd", "/usr/local/bin/etcd"] {
        let path = PathBuf::from(candidate);
        if path.exists() {
            return path;
        }
    }
    panic!(
        "etcd not found: install etcd-server (apt-get install etcd-server; scripts/setup.sh does)"
    );
}

impl EtcdServer {
    /// Starts a single-member cluster and waits until it serves requests.
    pub fn start() -> EtcdServer {
        Self::start_with(None)
    }

    /// [`EtcdServer::start`] serving clients over TLS with `server`'s
    /// certificate and requiring client certificates from its CA;
    /// `etcdctl` uses `client`.
    pub fn start_tls(server: TlsSet, client: TlsSet) -> EtcdServer {
        Self::start_with(Some((server, client)))
    }

    fn start_with(tls: Option<(TlsSet, TlsSet)>) -> EtcdServer {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let mut server = EtcdServer {
            child: None,
            log: data.path().join("etcd.log"),
            data,
            client_port: free_port(),
            peer_port: free_port(),
            tls,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::File::create(&self.log).unwrap_or_else(|e| panic!("etcd log: {e}"));
        let mut cmd = Command::new(etcd_binary());
        if let Some((server, _)) = &self.tls {
            cmd.arg(format!("--cert-file={}", server.cert.display()))
                .arg(format!("--key-file={}", server.key.display()))
                .arg(format!("--trusted-ca-file={}", server.ca.display()))
                .arg("--client-cert-auth");
        }
        let child = cmd
            .arg("--name=spear-test")
            .arg(format!(
                "--data-dir={}",
                self.data.path().join("data").display()
            ))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=spear-test={peer}"))
            .arg("--max-txn-ops=16384")
            .arg("--max-request-bytes=33554432")
            .env("ETCD_UNSUPPORTED_ARCH", std::env::consts::ARCH)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start etcd: {e}"));
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "etcd exited ({status}):\n{}",
                        std::fs::read_to_string(&self.log).unwrap_or_default()
                    );
                }
            }
            if TcpStream::connect(("127.0.0.1", self.client_port)).is_ok()
                && self.etcdctl(&["endpoint", "health"]).is_ok()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "etcd did not become healthy in 30 s:\n{}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// Runs etcdctl against this server.
    pub fn etcdctl(&self, args: &[&str]) -> Result<String, String> {
        etcdctl(&self.endpoint(), self.tls.as_ref().map(|(_, c)| c), args)
    }

    /// Compacts history up to `revision`.
    pub fn compact(&self, revision: u64) {
        self.etcdctl(&["compaction", &revision.to_string()])
            .unwrap_or_else(|e| panic!("etcd compaction: {e}"));
    }

    /// Stops etcd and starts it again on the same data and ports.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Restarts etcd on the same data and ports with other certificates
    /// (a rotation to a new CA).
    pub fn restart_with_tls(&mut self, server: TlsSet, client: TlsSet) {
        self.kill();
        self.tls = Some((server, client));
        self.spawn();
    }

    /// Stops etcd (SIGKILL) until [`EtcdServer::resume`].
    pub fn stop(&mut self) {
        self.kill();
    }

    /// Starts a stopped etcd again on the same data and ports.
    pub fn resume(&mut self) {
        if self.child.is_none() {
            self.spawn();
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A three-or-more-member etcd cluster, one member per network namespace,
/// TLS for clients and peers with certificates from `sms certs`, client
/// certificates required.
pub struct EtcdCluster {
    /// Killed on drop, like every [`crate::procs::Proc`].
    _members: Vec<crate::procs::Proc>,
    /// `https://IP:2379` of each member.
    pub endpoints: Vec<String>,
    /// `IP:2381` of each member: its Prometheus metrics, in plaintext.
    pub metrics: Vec<String>,
    /// The certificate etcdctl uses.
    pub client: TlsSet,
    _data: tempfile::TempDir,
}

impl EtcdCluster {
    pub fn start(certs: &crate::certs::Certs, places: &[crate::netns::Place]) -> EtcdCluster {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let initial: Vec<String> = places
            .iter()
            .enumerate()
            .map(|(i, p)| format!("m{i}=https://{}:2380", p.ip))
            .collect();
        let mut members = Vec::new();
        for (i, place) in places.iter().enumerate() {
            let tls = certs.host(&format!("etcd-{i}"), &[place.ip.into()]);
            let (ip, name) = (place.ip, format!("m{i}"));
            let mut cmd = place.command(etcd_binary());
            cmd.arg(format!("--name={name}"))
                .arg(format!("--data-dir={}", data.path().join(&name).display()))
                .arg(format!("--listen-client-urls=https://{ip}:2379"))
                .arg(format!("--advertise-client-urls=https://{ip}:2379"))
                .arg(format!("--listen-peer-urls=https://{ip}:2380"))
                .arg(format!("--initial-advertise-peer-urls=https://{ip}:2380"))
                .arg(format!("--initial-cluster={}", initial.join(",")))
                .arg("--initial-cluster-state=new")
                .arg("--initial-cluster-token=spear-test")
                .arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()))
                .arg(format!("--trusted-ca-file={}", tls.ca.display()))
                .arg("--client-cert-auth")
                .arg(format!("--peer-cert-file={}", tls.cert.display()))
                .arg(format!("--peer-key-file={}", tls.key.display()))
                .arg(format!("--peer-trusted-ca-file={}", tls.ca.display()))
                .arg("--peer-client-cert-auth")
                .arg(format!("--listen-metrics-urls=http://{ip}:2381"))
                .env("ETCD_UNSUPPORTED_ARCH", std::env::consts::ARCH);
            let log = data.path().join(format!("{name}.log"));
            members.push(crate::procs::Proc::spawn(&format!("etcd {name}"), cmd, log));
        }
        let cluster = EtcdCluster {
            _members: members,
            endpoints: places
                .iter()
                .map(|p| format!("https://{}:2379", p.ip))
                .collect(),
            metrics: places.iter().map(|p| format!("{}:2381", p.ip)).collect(),
            client: certs.host("etcdctl", &[]),
            _data: data,
        };
        crate::wait::eventually(
            "the etcd cluster to be healthy",
            Duration::from_secs(60),
            || cluster.etcdctl(&["endpoint", "health"]),
        );
        cluster
    }

    /// Requests of gRPC `method` (Txn, Range, Put, ...) the members have
    /// received, from their own metrics.
    pub fn received(&self, method: &str) -> f64 {
        let wanted = format!("grpc_method=\"{method}\"");
        self.metrics
            .iter()
            .map(|addr| {
                let text = crate::http::get(addr, "/metrics")
                    .unwrap_or_else(|e| panic!("etcd metrics at {addr}: {e}"));
                text.lines()
                    .filter(|l| l.starts_with("grpc_server_msg_received_total{"))
                    .filter(|l| l.contains(&wanted))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum::<f64>()
            })
            .sum()
    }

    /// Runs etcdctl against every member with the client certificate.
    pub fn etcdctl(&self, args: &[&str]) -> Result<String, String> {
        etcdctl(&self.endpoints.join(","), Some(&self.client), args)
    }
}

/// A plaintext etcd cluster of `members` members on loopback ports, for
/// benchmarks that need a real quorum but no network namespaces.
pub struct LocalEtcdCluster {
    _members: Vec<crate::procs::Proc>,
    /// `http://127.0.0.1:PORT` of each member.
    pub endpoints: Vec<String>,
    _data: tempfile::TempDir,
}

impl LocalEtcdCluster {
    pub fn start(members: usize) -> LocalEtcdCluster {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let ports: Vec<(u16, u16)> = (0..members).map(|_| (free_port(), free_port())).collect();
        let peer = |i: usize| format!("http://127.0.0.1:{}", ports[i].1);
        let initial: Vec<String> = (0..members).map(|i| format!("m{i}={}", peer(i))).collect();
        let endpoints: Vec<String> = ports
            .iter()
            .map(|(client, _)| format!("http://127.0.0.1:{client}"))
            .collect();
        let mut running = Vec::new();
        for (i, client) in endpoints.iter().enumerate() {
            let name = format!("m{i}");
            let mut cmd = Command::new(etcd_binary());
            cmd.arg(format!("--name={name}"))
                .arg(format!("--data-dir={}", data.path().join(&name).display()))
                .arg(format!("--listen-client-urls={client}"))
                .arg(format!("--advertise-client-urls={client}"))
                .arg(format!("--listen-peer-urls={}", peer(i)))
                .arg(format!("--initial-advertise-peer-urls={}", peer(i)))
                .arg(format!("--initial-cluster={}", initial.join(",")))
                .arg("--initial-cluster-state=new")
                .arg("--initial-cluster-token=spear-bench")
                .arg("--max-txn-ops=16384")
                .arg("--max-request-bytes=33554432")
                .env("ETCD_UNSUPPORTED_ARCH", std::env::consts::ARCH);
            let log = data.path().join(format!("{name}.log"));
            running.push(crate::procs::Proc::spawn(&format!("etcd {name}"), cmd, log));
        }
        let cluster = LocalEtcdCluster {
            _members: running,
            endpoints,
            _data: data,
        };
        crate::wait::eventually(
            "the etcd cluster to be healthy",
            Duration::from_secs(60),
            || etcdctl(&cluster.endpoints.join(","), None, &["endpoint", "health"]),
        );
        cluster
    }
}

/// Runs etcdctl against `endpoints`, with `tls`'s CA and certificate.
fn etcdctl(endpoints: &str, tls: Option<&TlsSet>, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new("etcdctl");
    cmd.arg(format!("--endpoints={endpoints}"));
    if let Some(client) = tls {
        cmd.arg(format!("--cacert={}", client.ca.display()))
            .arg(format!("--cert={}", client.cert.display()))
            .arg(format!("--key={}", client.key.display()));
    }
    let output = cmd
        .args(args)
        .env("ETCDCTL_API", "3")
        .output()
        .map_err(|e| format!("etcdctl: {e} (install etcd-client)"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}
