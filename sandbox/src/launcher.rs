//! The launcher: `spearlet sandbox-exec`, started by the node with the
//! server's stdio pipes, an empty environment, and the report socket as
//! descriptor 3, on which the plan and the server's environment arrive
//! first ([`Orders`]). Entered from `main` before any thread exists (new
//! user namespaces need a single-threaded caller).
//!
//! Three processes, as a state machine:
//! 1. **outer** (in the node's namespaces, the process the node holds):
//!    makes the new user, mount, PID, network, IPC, UTS and cgroup
//!    namespaces, maps the node's user to an unprivileged id inside,
//!    starts *init* and passes on its exit status. It ignores SIGTERM, so
//!    the node's graceful stop reaches the server and the server's exit
//!    ends all three.
//! 2. **init** (PID 1 of the new namespace): starts *server*, reaps every
//!    orphan, and exits with the server's status; it dies with *outer*,
//!    and with it the whole namespace.
//! 3. **server** (PID 2): lays out mounts and network, sets limits,
//!    Landlock, `no_new_privs` and seccomp, sends the [`Report`] with the
//!    destinations' listeners, and executes the server's program. If that
//!    fails, a second report says why.

use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use crate::cgroup::Cgroups;
use crate::launch::{receive_orders, send_report, Orders, REPORT_FD};
use crate::plan::HOME;
use crate::refusal::Refusal;
use crate::report::Report;
use crate::{limits, mounts, net, rules, seccomp};

/// The id the server has inside its user namespace: never root, so it
/// holds no capability there once its program runs.
pub const INSIDE_ID: u32 = 1000;

/// Exit status when the server could not be confined or run.
pub const EXIT_REFUSED: i32 = 125;

/// Runs the launcher if `args` (the process's own, program name first)
/// ask for it; returns its exit status. `None`: this process is not a
/// launcher.
pub fn run_if_asked(args: &[OsString]) -> Option<i32> {
    if args.get(1).map(|a| a.as_bytes()) != Some(crate::LAUNCHER_ARG.as_bytes()) {
        return None;
    }
    let report = report_fd();
    match receive_orders(report) {
        Ok(orders) => Some(run(&orders, report)),
        Err(why) => {
            refuse(report, &why);
            Some(EXIT_REFUSED)
        }
    }
}

/// Makes this process non-dumpable: its `/proc` files (environment,
/// memory) are no longer readable by other processes of its user, and
/// none can attach to it.
pub fn make_non_dumpable() {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) changes only this process's flag.
    #[allow(unsafe_code)]
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
    }
}

fn report_fd() -> BorrowedFd<'static> {
    // SAFETY: descriptor 3 is the report socket the node passes; if it is
    // absent, writes to it fail and are ignored.
    #[allow(unsafe_code)]
    unsafe {
        BorrowedFd::borrow_raw(REPORT_FD)
    }
}

fn refuse(report: BorrowedFd<'_>, why: &dyn std::fmt::Display) {
    let why = why.to_string();
    eprintln!("spear sandbox: {why}");
    let _ = send_report(report, &Report::refused(why), &[]);
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn fork() -> Result<libc::pid_t, Refusal> {
    // SAFETY: the launcher is single-threaded; the child only runs this
    // crate's code and then exec or exit.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        Err(Refusal::cannot("start a process")(errno()))
    } else {
        Ok(pid)
    }
}

/// Waits for `pid` and turns its end into an exit status.
fn wait_for(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status into our local.
        #[allow(unsafe_code)]
        let got = unsafe { libc::waitpid(pid, &mut status, 0) };
        if got == pid {
            break;
        }
        if got < 0 && errno().raw_os_error() != Some(libc::EINTR) {
            return EXIT_REFUSED;
        }
    }
    exit_status(status)
}

fn exit_status(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// State 1, outer.
fn run(orders: &Orders, report: BorrowedFd<'_>) -> i32 {
    let plan = &orders.plan;
    // SAFETY: getuid/getgid cannot fail.
    #[allow(unsafe_code)]
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let cgroups = Cgroups::join(plan);
    let flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWCGROUP;
    // SAFETY: unshare(2) changes only this process's namespaces.
    #[allow(unsafe_code)]
    if unsafe { libc::unshare(flags) } != 0 {
        refuse(report, &format!("cannot create the server's namespaces ({}); this kernel or its settings refuse unprivileged user namespaces (kernel.unprivileged_userns_clone, user.max_user_namespaces)", errno()));
        return EXIT_REFUSED;
    }
    let maps = [
        ("/proc/self/setgroups", "deny".to_string()),
        ("/proc/self/uid_map", format!("{INSIDE_ID} {uid} 1")),
        ("/proc/self/gid_map", format!("{INSIDE_ID} {gid} 1")),
    ];
    for (file, text) in maps {
        if let Err(error) = std::fs::write(file, text) {
            refuse(
                report,
                &format!("cannot map the server's user ({file}: {error})"),
            );
            return EXIT_REFUSED;
        }
    }
    let init = match fork() {
        Ok(0) => std::process::exit(init(orders, &cgroups.detail, report)),
        Ok(pid) => pid,
        Err(why) => {
            refuse(report, &why);
            return EXIT_REFUSED;
        }
    };
    // The node stops a server by closing its stdin, then SIGTERM to the
    // group, then SIGKILL: the server answers SIGTERM, outer waits.
    // SAFETY: setting a signal disposition to SIG_IGN.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    close_stdio_and(report.as_raw_fd());
    let status = wait_for(init);
    cgroups.remove();
    status
}

/// Closes this process's copies of the server's pipes and the report
/// socket, so the node sees them close when the server's copies do.
fn close_stdio_and(report: RawFd) {
    for fd in [0, 1, report] {
        // SAFETY: closing descriptors this process no longer uses.
        #[allow(unsafe_code)]
        unsafe {
            libc::close(fd);
        }
    }
}

/// State 2, init: PID 1 of the new namespace.
fn init(orders: &Orders, cgroups: &[String], report: BorrowedFd<'_>) -> i32 {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets this process's own flag.
    #[allow(unsafe_code)]
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    }
    let server = match fork() {
        Ok(0) => std::process::exit(server(orders, cgroups, report)),
        Ok(pid) => pid,
        Err(why) => {
            refuse(report, &why);
            return EXIT_REFUSED;
        }
    };
    close_stdio_and(report.as_raw_fd());
    // Reap everything; end when the server does (the kernel then ends
    // whatever else runs in the namespace).
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into our local.
        #[allow(unsafe_code)]
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == server {
            return exit_status(status);
        }
        if pid < 0 && errno().raw_os_error() != Some(libc::EINTR) {
            return EXIT_REFUSED;
        }
    }
}

/// State 3, server: confine, report, exec.
fn server(orders: &Orders, cgroups: &[String], report_fd: BorrowedFd<'_>) -> i32 {
    let plan = &orders.plan;
    let mut report = Report::default();
    report.push(
        "user namespace",
        true,
        format!("runs as uid {INSIDE_ID} with no capability outside its namespaces"),
    );
    let confined = (|| -> Result<Vec<std::net::TcpListener>, Refusal> {
        mounts::setup(plan, &mut report)?;
        let listeners = net::setup(plan, &mut report)?;
        limits::apply(plan, cgroups, &mut report)?;
        rules::apply(plan, &mut report)?;
        seccomp::apply(plan.required.seccomp, &mut report)?;
        Ok(listeners)
    })();
    let listeners = match confined {
        Ok(listeners) => listeners,
        Err(why) => {
            refuse(report_fd, &why);
            return EXIT_REFUSED;
        }
    };
    let (program, argv, envp) = match exec_args(orders) {
        Ok(args) => args,
        Err(why) => {
            refuse(report_fd, &why);
            return EXIT_REFUSED;
        }
    };
    let fds: Vec<RawFd> = listeners.iter().map(|l| l.as_raw_fd()).collect();
    if let Err(error) = send_report(report_fd, &report, &fds) {
        eprintln!("spear sandbox: cannot report to the node: {error}");
        return EXIT_REFUSED;
    }
    drop(listeners);
    let cwd = plan.cwd.clone().unwrap_or_else(|| HOME.into());
    if let Err(error) = std::env::set_current_dir(&cwd) {
        refuse(
            report_fd,
            &format!(
                "cannot enter the working directory {} inside the sandbox: {error}",
                cwd.display()
            ),
        );
        return EXIT_REFUSED;
    }
    // SAFETY: the report socket is close-on-exec: the node reads its end
    // closing as "the program runs".
    #[allow(unsafe_code)]
    unsafe {
        libc::fcntl(report_fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
    }
    let pointers = |list: &[CString]| {
        let mut ptrs: Vec<*const libc::c_char> = list.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        ptrs
    };
    let (argv_ptrs, envp_ptrs) = (pointers(&argv), pointers(&envp));
    // SAFETY: program, argv and envp are NUL-terminated strings (and
    // null-terminated arrays of them) that outlive the call.
    #[allow(unsafe_code)]
    unsafe {
        libc::execve(program.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr());
    }
    let why = format!(
        "cannot run {} inside the sandbox: {}",
        plan.program.display(),
        errno()
    );
    refuse(report_fd, &why);
    EXIT_REFUSED
}

type ExecArgs = (CString, Vec<CString>, Vec<CString>);

fn exec_args(orders: &Orders) -> Result<ExecArgs, Refusal> {
    let plan = &orders.plan;
    let nul = |what: &str| Refusal::Cannot(format!("{what} holds a NUL byte"));
    let program =
        CString::new(plan.program.as_os_str().as_bytes()).map_err(|_| nul("the program"))?;
    let mut argv = vec![program.clone()];
    for arg in &plan.args {
        argv.push(CString::new(arg.as_bytes()).map_err(|_| nul("an argument"))?);
    }
    let mut envp = Vec::with_capacity(orders.env.len());
    for (name, value) in &orders.env {
        let pair = format!("{name}={value}");
        envp.push(CString::new(pair).map_err(|_| nul(&format!("variable {name}")))?);
    }
    Ok((program, argv, envp))
}
