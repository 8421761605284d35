//! What every run's store starts from, either kind: its WASI context
//! (stdio, `argv[0]` and what the task grants; never a socket) and the
//! epoch watch that holds it to its CPU and wall limits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::cpu::CpuClock;
use super::limits::GuestLimits;
use super::state::Granted;

/// One run: its input, what it is granted, and the host state the linked
/// host API works on.
pub struct GuestRun<H> {
    pub stdin: Vec<u8>,
    /// `argv[0]`, the task id.
    pub name: String,
    /// What the task grants beyond stdio (nothing by default).
    pub granted: Granted,
    /// When the run must end: its start plus `limits.wall`, fixed by the
    /// caller so the host state can hold the same instant.
    pub deadline: Instant,
    pub host: H,
}

/// A store ready to run, with the pipes its output goes to.
pub(super) struct Prepared<T: 'static> {
    pub(super) store: Store<T>,
    pub(super) stdout: MemoryOutputPipe,
    pub(super) stderr: MemoryOutputPipe,
}

/// A directory the task grants that could not be given to the guest.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the directory {} the task grants: {cause}", dir.display())]
pub(super) struct GrantError {
    dir: PathBuf,
    cause: String,
}

/// The WASI context every run starts from, either kind: the run's stdin,
/// the pipes for its output, `argv[0]` and what the task grants (its
/// args, environment and directories); no socket.
fn wasi_context<H>(
    run: &GuestRun<H>,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> Result<WasiCtxBuilder, GrantError> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdin(MemoryInputPipe::new(run.stdin.clone()))
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .arg(&run.name)
        .args(&run.granted.args)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    for (key, value) in &run.granted.env {
        wasi.env(key, value);
    }
    for dir in &run.granted.dirs {
        let perms = if dir.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        // The directory opened when it was granted, not the path again.
        if let Err(cause) = wasi.preopened_dir(dir.open_path(), &dir.guest, perms) {
            return Err(GrantError {
                dir: dir.host.clone(),
                cause: format!("{cause:#}"),
            });
        }
    }
    Ok(wasi)
}

/// Arms `store`'s CPU and wall limits: checked at every tick the guest
/// sees, host calls or not.
fn watch<T>(store: &mut Store<T>, cpu: Arc<CpuClock>, limits: &GuestLimits, deadline: Instant) {
    store.set_epoch_deadline(1);
    let (budget, wall) = (limits.cpu, limits.wall);
    store.epoch_deadline_callback(move |_| {
        cpu.check(budget, wall, deadline)
            .map_err(wasmtime::Error::new)
    });
}

/// A fresh store for one run of either kind: its output pipes and WASI
/// context, a CPU clock, and the store `build` makes of them (with its
/// limiter), watched for its CPU and wall limits. On a grant that cannot
/// be opened, the sentence and the host state back.
pub(super) fn prepare<H, T>(
    run: GuestRun<H>,
    limits: &GuestLimits,
    build: impl FnOnce(WasiCtxBuilder, Arc<CpuClock>, H) -> Store<T>,
) -> Result<Prepared<T>, (String, H)> {
    let stdout = MemoryOutputPipe::new(limits.output_bytes);
    let stderr = MemoryOutputPipe::new(limits.output_bytes);
    let wasi = match wasi_context(&run, &stdout, &stderr) {
        Ok(wasi) => wasi,
        Err(why) => return Err((why.to_string(), run.host)),
    };
    let cpu = Arc::new(CpuClock::default());
    let mut store = build(wasi, Arc::clone(&cpu), run.host);
    watch(&mut store, cpu, limits, run.deadline);
    Ok(Prepared {
        store,
        stdout,
        stderr,
    })
}
