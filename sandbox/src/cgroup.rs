//! Process and memory bounds from cgroups, where the node may make them:
//! a cgroup of its own per server under the v1 `pids` and `memory`
//! hierarchies (a root node on a cgroup v1 host), or under a delegated
//! cgroup v2 subtree (`/sys/fs/cgroup/unified` or `/sys/fs/cgroup` when
//! it is v2 and writable). RLIMIT_NPROC does not bound a root node's
//! servers (the kernel exempts the host's root user), so without a
//! cgroup the process bound is the rlimit only, and the report says so.
//!
//! The outer launcher joins the cgroups before it makes its namespaces,
//! and leaves and removes them when the server has ended. It moves itself
//! by writing `0` (this thread) to `tasks`, not its pid to
//! `cgroup.procs`: moving a whole thread group takes the kernel's global
//! threadgroup lock, whose first taking waits out an RCU grace period
//! (10 to 27 ms measured here, most of a launch), while moving the
//! calling thread skips that lock (0.4 ms). The launcher is one thread
//! (it runs before any runtime starts), and what it forks inherits the
//! cgroup of the thread that forks.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::plan::Plan;

const V1_PIDS: &str = "/sys/fs/cgroup/pids";
const V1_MEMORY: &str = "/sys/fs/cgroup/memory";
/// The v1 file that moves one thread; `0` is the writer's own.
const THIS_THREAD_FILE: &str = "tasks";

/// The cgroups one server runs in.
#[derive(Default)]
pub struct Cgroups {
    made: Vec<(PathBuf, File)>,
    pub detail: Vec<String>,
}

/// This process's cgroup in the v1 hierarchy named `controller`.
fn own_v1(controller: &str) -> Option<String> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.trim_start_matches('/').to_string())
    })
}

impl Cgroups {
    /// Makes and joins a cgroup per controller that can be had; writes
    /// the bounds. What could not be had is left to the rlimits.
    pub fn join(plan: &Plan) -> Cgroups {
        let mut made = Cgroups::default();
        let pid = std::process::id();
        let name = format!("spear-{}-{pid}", sanitize(&plan.server));
        let memory = (plan.memory_mb.saturating_mul(1024 * 1024)).to_string();
        let wanted = [
            ("pids", V1_PIDS, "pids.max", plan.processes.to_string()),
            ("memory", V1_MEMORY, "memory.limit_in_bytes", memory),
        ];
        for (controller, root, file, value) in wanted {
            let Some(own) = own_v1(controller) else {
                continue;
            };
            let base = Path::new(root).join(own);
            sweep(&base);
            let dir = base.join(&name);
            let joined = fs::create_dir(&dir)
                .and_then(|()| fs::write(dir.join(file), &value))
                .and_then(|()| fs::write(dir.join(THIS_THREAD_FILE), "0"))
                .and_then(|()| {
                    File::options()
                        .write(true)
                        .open(base.join(THIS_THREAD_FILE))
                });
            match joined {
                Ok(back) => {
                    made.detail
                        .push(format!("cgroup v1 {controller} ({file} {value})"));
                    made.made.push((dir, back));
                }
                Err(_) => {
                    let _ = fs::remove_dir(&dir);
                }
            }
        }
        made
    }

    /// Leaves the cgroups (back to where this process was) and removes
    /// them; the server and everything it started have ended.
    pub fn remove(self) {
        for (dir, mut back) in self.made {
            let _ = back.write_all(b"0");
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// Removes the cgroups of launchers that are gone (a launcher killed
/// outright cannot remove its own). A cgroup still holding a process is
/// not removed: the kernel refuses.
fn sweep(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.starts_with("spear-"))
            .and_then(|n| n.rsplit('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}
