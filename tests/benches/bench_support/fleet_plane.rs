//! The SMS side of the fleet bench ([`Plane`]): one `sms` on a
//! one-member etcd, or replicas on a three-member etcd, with the
//! registry's servers written to the MCP dir, and its CPU and memory as
//! the bench reads them.

use std::time::Duration;

use spear_tests::etcd::{EtcdServer, LocalEtcdCluster};
use spear_tests::procs::{SmsOptions, SmsProc};

use super::cpu::pin_process;
use super::cpu_time::{clock_ticks_per_second, cpu_ticks};
use super::stats::rss_kib;
use super::tls::BenchCerts;

/// Servers in the registry.
pub const SERVERS: usize = 10_000;
/// The slices CPU windows are shown in.
pub const SLICE: Duration = Duration::from_secs(10);

/// The SMS side: one SMS on a one-member etcd, or `replicas` SMS on a
/// three-member etcd, each pinned to CPU 0. Replica 0 reads the MCP dir;
/// the others serve the registry they follow in etcd.
pub struct Plane {
    pub replicas: Vec<SmsProc>,
    _etcd_one: Option<EtcdServer>,
    _etcd_three: Option<LocalEtcdCluster>,
    _mcp: tempfile::TempDir,
}

impl Plane {
    pub fn start(replicas: usize, certs: &BenchCerts) -> Plane {
        let (one, three, endpoints) = match replicas {
            1 => {
                let etcd = EtcdServer::start();
                let endpoint = etcd.endpoint();
                (Some(etcd), None, endpoint)
            }
            _ => {
                let etcd = LocalEtcdCluster::start(3);
                let endpoints = etcd.endpoints.join(",");
                (None, Some(etcd), endpoints)
            }
        };
        let mcp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        write_servers(mcp.path());
        let replicas = (0..replicas)
            .map(|i| {
                let sms = SmsProc::start(SmsOptions {
                    mcp_dir: (i == 0).then(|| mcp.path().to_path_buf()),
                    etcd: Some(endpoints.clone()),
                    tls: Some(certs.sms.clone()),
                    client_tls: Some(certs.admin.clone()),
                    ..Default::default()
                });
                pin_process(sms.proc.pid().unwrap_or(0), 0);
                sms
            })
            .collect();
        Plane {
            replicas,
            _etcd_one: one,
            _etcd_three: three,
            _mcp: mcp,
        }
    }

    pub fn pids(&self) -> Vec<u32> {
        self.replicas
            .iter()
            .map(|sms| sms.proc.pid().unwrap_or(0))
            .collect()
    }

    pub fn rss_kib(&self) -> u64 {
        self.pids().into_iter().map(rss_kib).sum()
    }

    pub fn cpu_ticks(&self) -> u64 {
        self.pids().into_iter().map(cpu_ticks).sum()
    }

    /// SMS's share of one core in each 10 s of `window`.
    pub async fn cpu_slices(&self, window: Duration) -> Vec<f64> {
        let slices = (window.as_secs() / SLICE.as_secs()).max(1);
        let mut shares = Vec::new();
        for _ in 0..slices {
            shares.push(self.cpu_share(SLICE).await);
        }
        shares
    }

    /// SMS's share of one core over `window`, all replicas together.
    pub async fn cpu_share(&self, window: Duration) -> f64 {
        let start = self.cpu_ticks();
        tokio::time::sleep(window).await;
        let ticks = self.cpu_ticks() - start;
        ticks as f64 / clock_ticks_per_second() / window.as_secs_f64()
    }
}

/// SERVERS servers in files of 1,000 (a file may be 1 MiB).
fn write_servers(dir: &std::path::Path) {
    for file in 0..SERVERS / 1000 {
        let servers: serde_json::Map<String, serde_json::Value> = (file * 1000..(file + 1) * 1000)
            .map(|i| {
                let server = serde_json::json!({
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-everything"],
                    "description": format!("server {i} of the fleet benchmark"),
                });
                (format!("s{i:05}"), server)
            })
            .collect();
        let body = serde_json::json!({ "mcpServers": servers }).to_string();
        let path = dir.join(format!("servers-{file:02}.json"));
        std::fs::write(path, body).unwrap_or_else(|e| panic!("{e}"));
    }
}
