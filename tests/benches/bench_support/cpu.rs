//! Pinning a benchmark's threads, so the measured side and the load do
//! not share a CPU.

/// Runs the calling thread on `cpu` only.
pub fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // within it; sched_setaffinity(0, ..) only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Every thread of process `pid` onto `cpu` (with `taskset`, util-linux).
#[allow(dead_code)] // the registry suite pins its own SMS in-process
pub fn pin_process(pid: u32, cpu: usize) {
    let out = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &cpu.to_string(), &pid.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("taskset: {e}"));
    assert!(
        out.status.success(),
        "taskset: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
