//! The seccomp filter: the system calls of [`crate::syscalls`] are
//! refused with `EPERM` (a deny list, so any language runtime keeps
//! working), and `clone3` answers `ENOSYS`, so C libraries fall back to
//! `clone`, whose flags the filter can read.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use crate::refusal::Refusal;
use crate::report::Report;
use crate::syscalls::{denied, NAMESPACE_FLAGS, PERSONALITIES, SOCKET_FAMILIES};

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

/// One condition on the first argument, `len` wide.
fn first_argument(
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, Refusal> {
    SeccompCondition::new(0, len, op, value).map_err(Refusal::cannot("build the seccomp filter"))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, Refusal> {
    SeccompRule::new(conditions).map_err(Refusal::cannot("build the seccomp filter"))
}

/// The calls refused for some arguments only: `clone` making a
/// namespace, `socket` of a refused family, `personality` other than
/// the values Docker allows (every rule matched refuses the call).
fn by_argument() -> Result<BTreeMap<i64, Vec<SeccompRule>>, Refusal> {
    let clone = NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let flag = *flag;
            rule(vec![first_argument(
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    // `int domain`: the low 32 bits are the family.
    let socket = SOCKET_FAMILIES
        .iter()
        .map(|family| {
            rule(vec![first_argument(
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                *family,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Refused when it is none of the allowed values.
    let personality = vec![rule(
        PERSONALITIES
            .iter()
            .map(|value| first_argument(SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *value))
            .collect::<Result<Vec<_>, _>>()?,
    )?];
    Ok(BTreeMap::from([
        (libc::SYS_clone, clone),
        (libc::SYS_socket, socket),
        (libc::SYS_personality, personality),
    ]))
}

fn programs() -> Result<[BpfProgram; 2], Refusal> {
    let mut refused = by_argument()?;
    refused.extend(denied().map(|d| (d.nr, Vec::new())));
    let eperm = filter(SeccompAction::Errno(libc::EPERM as u32), refused)?;
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
                    "{} system calls refused, and clone, socket and personality for some arguments",
                    denied().count()
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
