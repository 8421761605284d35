//! Shared pieces of the registry benchmarks.

pub mod clients;
pub mod cpu;
pub mod cpu_time;
pub mod fleet;
pub mod fleet_plane;
pub mod memory;
pub mod propagation;
pub mod reconnect;
pub mod snapshot;
pub mod stats;
pub mod tls;

use std::sync::Arc;

use spear_proto::v1::{ServerRecord, ServerSpec, Transport};
use spear_sms::server::{Sms, SmsConfig, StoreConfig};
use spear_sms::store::{Change, EtcdStoreConfig};
use spear_sms::watch::HubConfig;
use spear_sms::writer::RegistryWriter;
use spear_tests::etcd::EtcdServer;

pub use cpu::pin_to;
pub use stats::{machine, Summary};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Etcd,
}

/// An in-process SMS serving real gRPC on a loopback port.
pub struct InProcess {
    pub sms_addr: String,
    pub hub: Arc<spear_sms::watch::Hub>,
    pub writer: Arc<RegistryWriter>,
    pub _etcd: Option<EtcdServer>,
}

pub async fn start_sms(backend: Backend) -> InProcess {
    start_sms_with(backend, None).await
}

/// [`start_sms_with`] on a runtime of its own, one thread pinned to CPU 0,
/// so the benchmark's clients (pinned elsewhere) do not take SMS's time.
pub fn start_sms_pinned(tls: Option<spear_identity::TlsIdentity>) -> InProcess {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        pin_to(0);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_start(|| pin_to(0))
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
        runtime.block_on(async move {
            let _ = tx.send(start_sms_with(Backend::Memory, tls).await);
            std::future::pending::<()>().await
        });
    });
    rx.recv().unwrap_or_else(|e| panic!("SMS thread: {e}"))
}

/// [`start_sms`] serving mutual TLS with `tls` (SMS's identity); a node
/// identity may hold 10 watch streams (the benchmarks' streams per
/// connection).
pub async fn start_sms_with(
    backend: Backend,
    tls: Option<spear_identity::TlsIdentity>,
) -> InProcess {
    let etcd = (backend == Backend::Etcd).then(EtcdServer::start);
    let store = match &etcd {
        None => StoreConfig::Memory,
        Some(etcd) => StoreConfig::Etcd(EtcdStoreConfig {
            endpoints: vec![etcd.endpoint()],
            prefix: "/spear".into(),
            connect_timeout: std::time::Duration::from_secs(5),
            ..Default::default()
        }),
    };
    let config = SmsConfig {
        listen: "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")),
        metrics_listen: None,
        mcp_dir: None,
        store,
        admin_token: Default::default(),
        join_token: Default::default(),
        ca_dir: None,
        tls,
        insecure: false,
        max_watches_per_node: 10,
        hub: HubConfig::default(),
        oauth_key_file: None,
        audit_retention: Default::default(),
        console_listen: None,
        viewer_token: Default::default(),
        module_dir: None,
        oidc: None,
        workload: Default::default(),
    };
    let sms = Sms::start(config)
        .await
        .unwrap_or_else(|e| panic!("start SMS: {e}"));
    let hub = Arc::clone(&sms.hub);
    let sms_addr = sms.grpc_addr.to_string();
    tokio::spawn(sms.serve(std::future::pending()));
    hub.wait_loaded().await;
    let writer = Arc::new(RegistryWriter::new(Arc::clone(&hub)));
    InProcess {
        sms_addr,
        hub,
        writer,
        _etcd: etcd,
    }
}

/// A realistic server record.
pub fn record(id: &str, description: &str) -> ServerRecord {
    ServerRecord {
        spec: Some(ServerSpec {
            id: id.to_string(),
            description: description.to_string(),
            transport: Transport::Stdio as i32,
            command: "npx".into(),
            args: vec![
                "-y".into(),
                "@modelcontextprotocol/server-everything".into(),
            ],
            env: [
                ("LOG_LEVEL".to_string(), "warn".to_string()),
                ("TOKEN".into(), "${TOKEN}".into()),
            ]
            .into(),
            enabled: true,
            ..Default::default()
        }),
        source: None,
        mod_revision: 0,
        pins: None,
    }
}

/// Registers `n` servers in batches of 500 (an etcd transaction's worth).
pub async fn preload(writer: &RegistryWriter, n: usize) {
    let ids: Vec<String> = (0..n).map(|i| format!("server-{i:05}")).collect();
    for chunk in ids.chunks(500) {
        let upserts: Vec<ServerRecord> = chunk
            .iter()
            .map(|id| record(id, "preloaded server for the benchmark"))
            .collect();
        writer
            .apply(|_| {
                Ok::<_, ()>(Change {
                    upserts: upserts.clone(),
                    deletes: vec![],
                })
            })
            .await
            .unwrap_or_else(|e| panic!("preload: {e:?}"));
    }
}
