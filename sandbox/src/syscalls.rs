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

/// The call numbers: `libc`'s, and the newer ones of the unified table
/// every 64-bit architecture shares from 424 on, which its constants lack.
#[allow(non_upper_case_globals)]
mod sys {
    pub use libc::*;
    pub const SYS_lsm_set_self_attr: i64 = 460;
    pub const SYS_open_tree_attr: i64 = 467;
}

/// `SYS_mount` → `mount`: the name an operator reads in docs/security.md.
const fn call_name(constant: &'static str) -> &'static str {
    constant.split_at(4).1
}

/// `deny![WHY => [SYS_a, SYS_b], ...]`: each call refused for that reason,
/// named after its constant so a name can never disagree with its number.
macro_rules! deny {
    ($($why:expr => [$($call:ident),+ $(,)?]),+ $(,)?) => {
        &[$($(Denied {
            nr: sys::$call,
            name: call_name(stringify!($call)),
            why: $why,
        },)+)+]
    };
}

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

/// Refused with `EPERM` whatever the arguments, on every architecture.
const EVERYWHERE: &[Denied] = deny![
    OTHER_PROCESSES => [
        SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_process_madvise,
    ],
    "takes a descriptor out of another process" => [SYS_pidfd_getfd],
    "compares the kernel objects of other processes (checkpointing tools only)" => [SYS_kcmp],
    NUMA => [SYS_migrate_pages, SYS_move_pages],
    MOUNTS => [
        SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_move_mount, SYS_open_tree,
        SYS_open_tree_attr, SYS_fsopen, SYS_fsmount, SYS_fsconfig, SYS_fspick, SYS_mount_setattr,
    ],
    KERNEL_CODE => [
        SYS_kexec_load, SYS_kexec_file_load, SYS_init_module, SYS_finit_module, SYS_delete_module,
        SYS_bpf,
    ],
    KEYRING => [SYS_keyctl, SYS_add_key, SYS_request_key],
    "performance counters observe the machine" => [SYS_perf_event_open],
    NAMESPACES => [SYS_unshare, SYS_setns],
    "a favourite of kernel exploits; no server needs it" => [SYS_userfaultfd],
    HANDLES => [SYS_open_by_handle_at, SYS_name_to_handle_at],
    IO_URING => [SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register],
    MACHINE => [
        SYS_reboot, SYS_swapon, SYS_swapoff, SYS_acct, SYS_quotactl, SYS_quotactl_fd,
        SYS_settimeofday, SYS_clock_settime, SYS_clock_adjtime, SYS_adjtimex, SYS_sethostname,
        SYS_setdomainname,
    ],
    "reads the kernel's log" => [SYS_syslog],
    "hangs up the terminal" => [SYS_vhangup],
    "changes the process's security module label" => [SYS_lsm_set_self_attr],
    "watches the filesystem past the mount namespace" => [SYS_fanotify_init],
    "a profiler's; no server needs it" => [SYS_lookup_dcookie],
];

/// The x86-64 calls other architectures never had.
#[cfg(target_arch = "x86_64")]
const THIS_ARCH: &[Denied] = deny![
    PORTS => [SYS_iopl, SYS_ioperm],
    OBSOLETE => [SYS_uselib, SYS_ustat, SYS_sysfs],
];
#[cfg(not(target_arch = "x86_64"))]
const THIS_ARCH: &[Denied] = &[];

/// Every call refused with `EPERM` whatever its arguments.
pub fn denied() -> impl Iterator<Item = &'static Denied> {
    EVERYWHERE.iter().chain(THIS_ARCH)
}

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
        for d in denied() {
            assert!(seen.insert(d.nr), "{} is listed twice", d.name);
            assert!(!d.why.is_empty(), "{} says no reason", d.name);
        }
        for name in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
            assert!(denied().any(|d| d.name == name), "{name}");
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
        for d in denied() {
            let named = section.contains(&format!("`{}`", d.name))
                || (d.name.starts_with("process_vm_")
                    && section.contains("`process_vm_readv`/`writev`"))
                || ((d.name.starts_with("kexec") || d.name.contains("_module"))
                    && section.contains("the modules and `kexec` calls"));
            assert!(named, "docs/security.md does not name {}", d.name);
        }
    }
}
