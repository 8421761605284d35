//! Resource bounds. cgroup v2 is the better tool (it bounds a tree's
//! memory, not each process's); where the node has no delegated v2
//! subtree (cgroup v1 hosts among them) these rlimits are what holds, and
//! the report says so.

use crate::plan::Plan;
use crate::refusal::Refusal;
use crate::report::Report;

fn set(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads the struct we pass; no memory is kept.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::setrlimit(resource, &limit) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets the server's process, memory and core-dump bounds. Processes are
/// counted per user in its own user namespace (Linux ≥ 5.14), so the
/// bound is the server's own tree, not the node user's.
pub fn apply(plan: &Plan, cgroups: &[String], report: &mut Report) -> Result<(), Refusal> {
    set(libc::RLIMIT_NPROC, plan.processes).map_err(Refusal::cannot(format!(
        "bound processes to {}",
        plan.processes
    )))?;
    let bytes = plan.memory_mb.saturating_mul(1024 * 1024);
    set(libc::RLIMIT_DATA, bytes).map_err(Refusal::cannot(format!(
        "bound memory to {} MiB",
        plan.memory_mb
    )))?;
    set(libc::RLIMIT_CORE, 0).map_err(Refusal::cannot("turn core dumps off"))?;
    let rlimits = format!(
        "rlimits: {} processes, {} MiB data per process, no core dumps",
        plan.processes, plan.memory_mb
    );
    if cgroups.is_empty() {
        // SAFETY: getuid cannot fail.
        #[allow(unsafe_code)]
        let root = unsafe { libc::getuid() } == 0;
        let note = if root {
            "; no cgroup could be made, and the kernel exempts a root node's processes from RLIMIT_NPROC: processes are NOT bounded"
        } else {
            "; no cgroup could be made"
        };
        report.push("limits", !root, format!("{rlimits}{note}"));
    } else {
        report.push("limits", true, format!("{}; {rlimits}", cgroups.join(", ")));
    }
    Ok(())
}
