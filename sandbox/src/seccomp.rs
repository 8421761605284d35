//! The seccomp filter: system calls an MCP server never needs are refused
//! with `EPERM` (a deny list, so any language runtime keeps working):
//! debugging other processes, mounting, loading kernel code or BPF, the
//! kernel keyring, performance counters, new namespaces, and the like.
//! `clone3` answers `ENOSYS`, so C libraries fall back to `clone`, whose
//! flags the filter can read.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use crate::refusal::Refusal;
use crate::report::Report;

/// Refused whatever their arguments.
const DENIED: &[(i64, &str)] = &[
    (libc::SYS_ptrace, "ptrace"),
    (libc::SYS_process_vm_readv, "process_vm_readv"),
    (libc::SYS_process_vm_writev, "process_vm_writev"),
    (libc::SYS_mount, "mount"),
    (libc::SYS_umount2, "umount2"),
    (libc::SYS_pivot_root, "pivot_root"),
    (libc::SYS_chroot, "chroot"),
    (libc::SYS_move_mount, "move_mount"),
    (libc::SYS_open_tree, "open_tree"),
    (libc::SYS_fsopen, "fsopen"),
    (libc::SYS_fsmount, "fsmount"),
    (libc::SYS_fsconfig, "fsconfig"),
    (libc::SYS_fspick, "fspick"),
    (libc::SYS_mount_setattr, "mount_setattr"),
    (libc::SYS_kexec_load, "kexec_load"),
    (libc::SYS_kexec_file_load, "kexec_file_load"),
    (libc::SYS_init_module, "init_module"),
    (libc::SYS_finit_module, "finit_module"),
    (libc::SYS_delete_module, "delete_module"),
    (libc::SYS_bpf, "bpf"),
    (libc::SYS_keyctl, "keyctl"),
    (libc::SYS_add_key, "add_key"),
    (libc::SYS_request_key, "request_key"),
    (libc::SYS_perf_event_open, "perf_event_open"),
    (libc::SYS_unshare, "unshare"),
    (libc::SYS_setns, "setns"),
    (libc::SYS_userfaultfd, "userfaultfd"),
    (libc::SYS_open_by_handle_at, "open_by_handle_at"),
    (libc::SYS_name_to_handle_at, "name_to_handle_at"),
    (libc::SYS_reboot, "reboot"),
    (libc::SYS_swapon, "swapon"),
    (libc::SYS_swapoff, "swapoff"),
    (libc::SYS_acct, "acct"),
    (libc::SYS_syslog, "syslog"),
    (libc::SYS_quotactl, "quotactl"),
    (libc::SYS_settimeofday, "settimeofday"),
    (libc::SYS_clock_settime, "clock_settime"),
    (libc::SYS_clock_adjtime, "clock_adjtime"),
    (libc::SYS_adjtimex, "adjtimex"),
    (libc::SYS_sethostname, "sethostname"),
    (libc::SYS_setdomainname, "setdomainname"),
    (libc::SYS_fanotify_init, "fanotify_init"),
    (libc::SYS_lookup_dcookie, "lookup_dcookie"),
    (libc::SYS_iopl, "iopl"),
    (libc::SYS_ioperm, "ioperm"),
];

/// `clone` flags that make a new namespace.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

fn filter(
    action: SeccompAction,
    rules: BTreeMap<i64, Vec<SeccompRule>>,
) -> Result<BpfProgram, Refusal> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(Refusal::failed("seccomp does not know this architecture"))?;
    SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
        .and_then(BpfProgram::try_from)
        .map_err(Refusal::cannot("build the seccomp filter"))
}

fn programs() -> Result<[BpfProgram; 2], Refusal> {
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|(nr, _)| (*nr, Vec::new())).collect();
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let condition = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(*flag),
            *flag,
        )
        .map_err(Refusal::cannot("build the seccomp filter"))?;
        clone_rules.push(
            SeccompRule::new(vec![condition])
                .map_err(Refusal::cannot("build the seccomp filter"))?,
        );
    }
    denied.insert(libc::SYS_clone, clone_rules);
    let eperm = filter(SeccompAction::Errno(libc::EPERM as u32), denied)?;
    let clone3 = filter(
        SeccompAction::Errno(libc::ENOSYS as u32),
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
    )?;
    Ok([eperm, clone3])
}

/// Installs the filters on the calling process (inherited by every
/// process it starts). `no_new_privs` must already be set.
pub fn apply(required: bool, report: &mut Report) -> Result<(), Refusal> {
    let installed = programs().and_then(|programs| {
        programs.iter().try_for_each(|program| {
            seccompiler::apply_filter(program)
                .map_err(Refusal::failed("the kernel refused the seccomp filter"))
        })
    });
    match installed {
        Ok(()) => {
            report.push(
                "seccomp",
                true,
                format!(
                    "{} system calls and namespace-creating clone refused",
                    DENIED.len() + 1
                ),
            );
            Ok(())
        }
        Err(why) if required => Err(Refusal::Cannot(format!(
            "{why}; seccomp is required (allow servers without it with [sandbox] accept_less = [\"seccomp\"] in the node policy)"
        ))),
        Err(why) => {
            report.push("seccomp", false, why.to_string());
            Ok(())
        }
    }
}
