//! A sandboxed server's way out: for each destination its file declares,
//! the node accepts on the listener the launcher made inside the server's
//! network namespace and connects to the destination itself. The name is
//! resolved once, when the server starts, and each address passes the
//! node's egress guard; the server can reach nothing else.

use spear_sandbox::refusal::Refusal;
use std::net::SocketAddr;

use spear_sandbox::Forward;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::node_policy::Egress;

/// The forwarding tasks of one server; they end when it is dropped.
#[derive(Default)]
pub struct Forwarders {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Forwarders {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Most connections one destination carries at once.
const MAX_OPEN: usize = 64;

impl Forwarders {
    /// Resolves each destination and starts forwarding its listener.
    /// A destination that does not resolve, or resolves only to addresses
    /// the egress guard refuses, is refused with a sentence.
    pub async fn start(
        server: &str,
        forwards: &[Forward],
        listeners: Vec<std::net::TcpListener>,
        egress: Option<&Egress>,
    ) -> Result<Forwarders, Refusal> {
        let mut started = Forwarders::default();
        for (forward, listener) in forwards.iter().zip(listeners) {
            let target = resolve(forward, egress).await?;
            let cannot = || Refusal::cannot(format!("forward {}:{}", forward.host, forward.port));
            listener.set_nonblocking(true).map_err(cannot())?;
            let listener = TcpListener::from_std(listener).map_err(cannot())?;
            info!(server_id = server, destination = %format!("{}:{}", forward.host, forward.port), %target, "sandbox: forwarding a declared destination");
            started.tasks.push(tokio::spawn(accept_loop(
                server.to_string(),
                listener,
                target,
            )));
        }
        Ok(started)
    }
}

async fn resolve(forward: &Forward, egress: Option<&Egress>) -> Result<SocketAddr, Refusal> {
    let shown = format!("{}:{}", forward.host, forward.port);
    let found: Vec<SocketAddr> = tokio::net::lookup_host((forward.host.as_str(), forward.port))
        .await
        .map_err(Refusal::failed(format!(
            "its destination {shown} does not resolve on this node"
        )))?
        .collect();
    let mut refused = None;
    for addr in &found {
        match egress.map(|g| g.check_ip(&forward.host, addr.ip())) {
            None | Some(Ok(())) => return Ok(*addr),
            Some(Err(why)) => refused = refused.or(Some(why)),
        }
    }
    Err(match refused {
        Some(why) => Refusal::failed(format!("its destination {shown}"))(why),
        None => Refusal::Cannot(format!("its destination {shown} resolves to no address")),
    })
}

async fn accept_loop(server: String, listener: TcpListener, target: SocketAddr) {
    let open = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_OPEN));
    loop {
        let (inside, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(error) => {
                warn!(server_id = server, %error, "sandbox: a forwarded destination stopped accepting");
                return;
            }
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            warn!(server_id = server, %target, "sandbox: too many connections to one destination; refused one");
            continue;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut inside = inside;
            match TcpStream::connect(target).await {
                Ok(mut outside) => {
                    let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
                }
                Err(error) => {
                    warn!(server_id = server, %target, %error, "sandbox: cannot reach a declared destination")
                }
            }
        });
    }
}
