//! Landlock: the file system and TCP rights the server keeps, whatever
//! the mount namespace shows it. Read and execute on the system's shared
//! files and its own code, read and write on its granted directories and
//! scratch space, a few devices, TCP connections only to its
//! destinations' ports, no TCP listening; on kernels with Landlock ABI 6
//! no signals to, and no abstract sockets of, anything outside.

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use crate::plan::{Plan, DEVICES, SCRATCH, SYSTEM_READ};
use crate::refusal::Refusal;
use crate::report::Report;

/// The newest ABI this code asks for; older kernels get what they have
/// (best effort), and the report says which ABI was in force.
const ABI_WANTED: ABI = ABI::V10;

/// Restricts the calling process (and every process it starts).
pub fn apply(plan: &Plan, report: &mut Report) -> Result<(), Refusal> {
    let fail = |e: landlock::RulesetError| Refusal::cannot("build the Landlock rules")(e);
    let read = AccessFs::from_read(ABI_WANTED);
    let all = AccessFs::from_all(ABI_WANTED);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(fail)?
        .handle_access(AccessNet::from_all(ABI_WANTED))
        .map_err(fail)?
        .scope(Scope::from_all(ABI_WANTED))
        .map_err(fail)?
        .create()
        .map_err(fail)?;
    let scratch = [std::path::PathBuf::from(SCRATCH)];
    let grants = SYSTEM_READ
        .iter()
        .map(std::path::PathBuf::from)
        .chain(plan.read.iter().cloned())
        .chain([std::path::PathBuf::from("/proc")])
        .map(|p| (p, read))
        .chain(plan.write.iter().chain(&scratch).map(|p| (p.clone(), all)))
        .chain(
            DEVICES
                .iter()
                .map(|d| (d.into(), AccessFs::from_file(ABI_WANTED))),
        );
    for (path, access) in grants {
        // A path that is not there grants nothing (a system without /lib32).
        let Ok(fd) = PathFd::new(&path) else {
            continue;
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(Refusal::cannot(format!("grant {}", path.display())))?;
    }
    for forward in &plan.forwards {
        ruleset = ruleset
            .add_rule(NetPort::new(forward.port, AccessNet::ConnectTcp))
            .map_err(Refusal::cannot(format!("allow port {}", forward.port)))?;
    }
    let status = ruleset
        .restrict_self()
        .map_err(Refusal::cannot("enforce the Landlock rules"))?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => format!("{effective_abi:?}"),
        LandlockStatus::NotEnabled => "not enabled in this kernel".into(),
        LandlockStatus::NotImplemented => "not built into this kernel".into(),
    };
    let enforced = status.ruleset != RulesetStatus::NotEnforced;
    let detail = match status.ruleset {
        RulesetStatus::FullyEnforced => format!("ABI {abi}, every rule"),
        RulesetStatus::PartiallyEnforced => format!("ABI {abi}: the rules this kernel knows"),
        RulesetStatus::NotEnforced => format!("Landlock {abi}"),
    };
    report.push("landlock", enforced, detail);
    report.push(
        "no_new_privs",
        status.no_new_privs,
        if status.no_new_privs {
            "set"
        } else {
            "could not be set"
        },
    );
    if !enforced && plan.required.landlock {
        return Err(Refusal::Cannot(format!(
            "Landlock is required and the kernel does not enforce it (Landlock {abi}); allow servers without it with [sandbox] accept_less = [\"landlock\"] in the node policy, or use a kernel with Landlock"
        )));
    }
    Ok(())
}
