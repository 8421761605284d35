//! CPU a process used, from `/proc`: how the fleet bench tells which side
//! (SMS, or the bench nodes) bounded a time it measured.

use std::time::Instant;

/// `ticks` of CPU used since `since`, as a share of one core: near 100 %
/// says that side (the bench nodes on CPU 1, or SMS on CPU 0) bounded the
/// time measured.
pub fn busy(ticks: u64, since: Instant) -> String {
    let used = ticks as f64 / clock_ticks_per_second();
    let took = since.elapsed().as_secs_f64();
    format!(
        "{used:.1} s of CPU in {took:.1} s ({:.0} % of a core)",
        used / took * 100.0
    )
}

/// This process's CPU so far, in clock ticks.
pub fn own_ticks() -> u64 {
    cpu_ticks(std::process::id())
}

/// The kernel's clock ticks per second (`/proc` counts CPU in them).
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// utime + stime of `pid`, in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which ends at the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    field(11) + field(12)
}
