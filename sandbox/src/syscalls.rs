//! The system calls a sandboxed MCP server is refused, each with why
//! (docs/security.md, "System calls": how this list compares with Docker's
//! default seccomp profile).
//!
//! A deny list, not an allow list, so every language runtime keeps
//! working: what is here is a call no MCP server needs that reaches the
//! kernel past the namespaces, Landlock and `no_new_privs`, or that the
//! kernel answers on behalf of the whole machine.

/// A call refused whatever its arguments.
pub struct Denied {
    /// Its number on this architecture.
    pub nr: i64,
    pub name: &'static str,
    /// Why no server may make it.
    pub why: &'static str,
}

const fn denied(nr: i64, name: &'static str, why: &'static str) -> Denied {
    Denied { nr, name, why }
}

/// `lsm_set_self_attr` and `open_tree_attr`: numbers of the unified table
/// every 64-bit architecture shares from 424 on, newer than the `libc`
/// crate's constants.
const SYS_LSM_SET_SELF_ATTR: i64 = 460;
const SYS_OPEN_TREE_ATTR: i64 = 467;

const OTHER_PROCESSES: &str = "reads or changes another process";
const MOUNTS: &str = "changes what is mounted";
const KERNEL_CODE: &str = "loads code into the kernel";
const MACHINE: &str = "changes the whole machine";
const IO_URING: &str = "io_uring runs file and socket operations seccomp never sees, and is much of the kernel's recent attack surface (refused by Docker's default too)";
const NUMA: &str = "moves another process's memory between NUMA nodes";
const HANDLES: &str = "opens files past the mount namespace";
const KEYRING: &str = "the kernel keyring is not namespaced";
const NAMESPACES: &str = "new namespaces are the sandbox's, not the server's";
const PORTS: &str = "raw I/O ports";
const OBSOLETE: &str = "obsolete; no runtime calls it";

/// Refused with `EPERM` whatever the arguments.
pub const DENIED: &[Denied] = &[
    denied(libc::SYS_ptrace, "ptrace", OTHER_PROCESSES),
    denied(
        libc::SYS_process_vm_readv,
        "process_vm_readv",
        OTHER_PROCESSES,
    ),
    denied(
        libc::SYS_process_vm_writev,
        "process_vm_writev",
        OTHER_PROCESSES,
    ),
    denied(
        libc::SYS_process_madvise,
        "process_madvise",
        OTHER_PROCESSES,
    ),
    denied(
        libc::SYS_pidfd_getfd,
        "pidfd_getfd",
        "takes a descriptor out of another process",
    ),
    denied(
        libc::SYS_kcmp,
        "kcmp",
        "compares the kernel objects of other processes (checkpointing tools only)",
    ),
    denied(libc::SYS_migrate_pages, "migrate_pages", NUMA),
    denied(libc::SYS_move_pages, "move_pages", NUMA),
    denied(libc::SYS_mount, "mount", MOUNTS),
    denied(libc::SYS_umount2, "umount2", MOUNTS),
    denied(libc::SYS_pivot_root, "pivot_root", MOUNTS),
    denied(libc::SYS_chroot, "chroot", MOUNTS),
    denied(libc::SYS_move_mount, "move_mount", MOUNTS),
    denied(libc::SYS_open_tree, "open_tree", MOUNTS),
    denied(SYS_OPEN_TREE_ATTR, "open_tree_attr", MOUNTS),
    denied(libc::SYS_fsopen, "fsopen", MOUNTS),
    denied(libc::SYS_fsmount, "fsmount", MOUNTS),
    denied(libc::SYS_fsconfig, "fsconfig", MOUNTS),
    denied(libc::SYS_fspick, "fspick", MOUNTS),
    denied(libc::SYS_mount_setattr, "mount_setattr", MOUNTS),
    denied(libc::SYS_kexec_load, "kexec_load", KERNEL_CODE),
    denied(libc::SYS_kexec_file_load, "kexec_file_load", KERNEL_CODE),
    denied(libc::SYS_init_module, "init_module", KERNEL_CODE),
    denied(libc::SYS_finit_module, "finit_module", KERNEL_CODE),
    denied(libc::SYS_delete_module, "delete_module", KERNEL_CODE),
    denied(libc::SYS_bpf, "bpf", KERNEL_CODE),
    denied(libc::SYS_keyctl, "keyctl", KEYRING),
    denied(libc::SYS_add_key, "add_key", KEYRING),
    denied(libc::SYS_request_key, "request_key", KEYRING),
    denied(
        libc::SYS_perf_event_open,
        "perf_event_open",
        "performance counters observe the machine",
    ),
    denied(libc::SYS_unshare, "unshare", NAMESPACES),
    denied(libc::SYS_setns, "setns", NAMESPACES),
    denied(
        libc::SYS_userfaultfd,
        "userfaultfd",
        "a favourite of kernel exploits; no server needs it",
    ),
    denied(libc::SYS_open_by_handle_at, "open_by_handle_at", HANDLES),
    denied(libc::SYS_name_to_handle_at, "name_to_handle_at", HANDLES),
    denied(libc::SYS_io_uring_setup, "io_uring_setup", IO_URING),
    denied(libc::SYS_io_uring_enter, "io_uring_enter", IO_URING),
    denied(libc::SYS_io_uring_register, "io_uring_register", IO_URING),
    denied(libc::SYS_reboot, "reboot", MACHINE),
    denied(libc::SYS_swapon, "swapon", MACHINE),
    denied(libc::SYS_swapoff, "swapoff", MACHINE),
    denied(libc::SYS_acct, "acct", MACHINE),
    denied(libc::SYS_syslog, "syslog", "reads the kernel's log"),
    denied(libc::SYS_quotactl, "quotactl", MACHINE),
    denied(libc::SYS_quotactl_fd, "quotactl_fd", MACHINE),
    denied(libc::SYS_settimeofday, "settimeofday", MACHINE),
    denied(libc::SYS_clock_settime, "clock_settime", MACHINE),
    denied(libc::SYS_clock_adjtime, "clock_adjtime", MACHINE),
    denied(libc::SYS_adjtimex, "adjtimex", MACHINE),
    denied(libc::SYS_sethostname, "sethostname", MACHINE),
    denied(libc::SYS_setdomainname, "setdomainname", MACHINE),
    denied(libc::SYS_vhangup, "vhangup", "hangs up the terminal"),
    denied(
        SYS_LSM_SET_SELF_ATTR,
        "lsm_set_self_attr",
        "changes the process's security module label",
    ),
    denied(
        libc::SYS_fanotify_init,
        "fanotify_init",
        "watches the filesystem past the mount namespace",
    ),
    denied(
        libc::SYS_lookup_dcookie,
        "lookup_dcookie",
        "a profiler's; no server needs it",
    ),
    #[cfg(target_arch = "x86_64")]
    denied(libc::SYS_iopl, "iopl", PORTS),
    #[cfg(target_arch = "x86_64")]
    denied(libc::SYS_ioperm, "ioperm", PORTS),
    #[cfg(target_arch = "x86_64")]
    denied(libc::SYS_uselib, "uselib", OBSOLETE),
    #[cfg(target_arch = "x86_64")]
    denied(libc::SYS_ustat, "ustat", OBSOLETE),
    #[cfg(target_arch = "x86_64")]
    denied(libc::SYS_sysfs, "sysfs", OBSOLETE),
];

/// `clone` flags that make a new namespace: `clone` with any of them is
/// refused (`clone3`, whose flags sit in memory the filter cannot read,
/// answers `ENOSYS`, so C libraries fall back to `clone`).
pub const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// Socket families refused: `AF_VSOCK` reaches the hypervisor's host
/// past the network namespace (vsock is not namespaced), `AF_ALG` is the
/// kernel's crypto API, a long list of kernel bugs. Both as Docker.
pub const SOCKET_FAMILIES: &[u64] = &[libc::AF_VSOCK as u64, libc::AF_ALG as u64];

/// The `personality` values allowed, as Docker allows them: the default
/// (`PER_LINUX`), `PER_LINUX32`, `UNAME26` with either, and the query
/// (`0xffffffff`). Every other flag (`ADDR_NO_RANDOMIZE`,
/// `READ_IMPLIES_EXEC`, ...) weakens what the kernel does for the process.
pub const PERSONALITIES: &[u64] = &[0x0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_is_refused_once_and_says_why() {
        let mut seen = std::collections::BTreeSet::new();
        for d in DENIED {
            assert!(seen.insert(d.nr), "{} is listed twice", d.name);
            assert!(!d.why.is_empty(), "{} says no reason", d.name);
        }
        for name in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
            assert!(DENIED.iter().any(|d| d.name == name), "{name}");
        }
    }

    /// docs/security.md names every call refused (its comparison with
    /// Docker's profile is the operator's list of what is refused).
    #[test]
    fn the_security_doc_names_every_refused_call() {
        let doc = include_str!("../../docs/security.md");
        let start = doc
            .find("### System calls, compared with Docker's default")
            .unwrap_or_else(|| panic!("docs/security.md has no system calls section"));
        let section = &doc[start..];
        for d in DENIED {
            let named = section.contains(&format!("`{}`", d.name))
                || (d.name.starts_with("process_vm_")
                    && section.contains("`process_vm_readv`/`writev`"))
                || ((d.name.starts_with("kexec") || d.name.contains("_module"))
                    && section.contains("the modules and `kexec` calls"));
            assert!(named, "docs/security.md does not name {}", d.name);
        }
    }
}
