//! The node's side of starting a launcher, and the report socket both
//! sides speak: a `SOCK_SEQPACKET` pair, the launcher's end as descriptor
//! 3. The launcher sends one [`Report`] (JSON) with the destinations'
//! listening sockets attached; its end then closes on a successful exec,
//! or carries a second report saying why the exec failed.
//!
//! Entry points: [`ReportSocket::pair`], [`ReportSocket::install_in_child`]
//! (for the spawn's `pre_exec`), [`ReportSocket::read`].

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::plan::Plan;
use crate::refusal::Refusal;
use crate::report::Report;

/// The descriptor the node's report socket arrives on in the launcher.
pub const REPORT_FD: RawFd = 3;
/// Most listeners one report carries (one per declared destination).
pub const MAX_FORWARDS: usize = 32;
/// Largest plan or report (a plan holds the server's arguments).
const MAX_REPORT: usize = 256 * 1024;

/// Why the node got no usable report.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot open the sandbox's report socket: {0}")]
    Socket(std::io::Error),
    #[error(
        "the sandbox launcher ended without a report (is this binary a spearlet? see its stderr)"
    )]
    NoReport,
    #[error("the sandbox launcher sent no report within {0:?}")]
    Timeout(Duration),
    #[error("the sandbox launcher's report is unreadable: {0}")]
    Unreadable(String),
    #[error("cannot read the sandbox's report: {0}")]
    Read(std::io::Error),
}

/// The node's end of the report socket.
pub struct ReportSocket {
    fd: OwnedFd,
}

/// A report and the listeners it carried, in plan order.
pub struct Received {
    pub report: Report,
    pub listeners: Vec<std::net::TcpListener>,
}

impl ReportSocket {
    /// A new pair: the node's end, and the end the launcher gets as
    /// descriptor 3 (close the node's copy of it once spawned).
    pub fn pair() -> Result<(ReportSocket, OwnedFd), LaunchError> {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two new descriptors into `fds`.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(LaunchError::Socket(std::io::Error::last_os_error()));
        }
        // SAFETY: both descriptors are new and owned by nothing else.
        #[allow(unsafe_code)]
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok((ReportSocket { fd: ours }, theirs))
    }

    /// Sends the launcher its orders; they wait in the socket until read.
    pub fn send_orders(&self, orders: &Orders) -> Result<(), LaunchError> {
        let body =
            serde_json::to_vec(orders).map_err(|e| LaunchError::Unreadable(e.to_string()))?;
        if body.len() > MAX_REPORT {
            return Err(LaunchError::Unreadable(format!(
                "the plan is {} bytes, over {MAX_REPORT}",
                body.len()
            )));
        }
        send(self.fd.as_fd(), &body, &[]).map_err(LaunchError::Socket)
    }

    /// Makes `theirs` descriptor 3 of the child, inheritable. Only
    /// async-signal-safe calls: it runs between fork and exec.
    pub fn install_in_child(theirs: RawFd) -> std::io::Result<()> {
        // SAFETY: dup2 and fcntl on descriptors of this (child) process.
        #[allow(unsafe_code)]
        unsafe {
            if theirs == REPORT_FD {
                let flags = libc::fcntl(theirs, libc::F_GETFD);
                if flags < 0 || libc::fcntl(theirs, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(theirs, REPORT_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Waits up to `timeout` for the report, then for the program to be
    /// executed (the socket closing) or a second report saying it was
    /// not. Blocking: call it off the async runtime.
    pub fn read(self, timeout: Duration) -> Result<Received, LaunchError> {
        let deadline = Instant::now() + timeout;
        let (first, fds) = self.receive(deadline, timeout)?;
        let listeners = fds
            .into_iter()
            .map(std::net::TcpListener::from)
            .collect::<Vec<_>>();
        let report = parse(&first)?;
        if report.refused.is_some() {
            return Ok(Received { report, listeners });
        }
        match self.receive(deadline, timeout) {
            Err(LaunchError::NoReport) => Ok(Received { report, listeners }),
            Ok((second, _)) => Ok(Received {
                report: parse(&second)?,
                listeners,
            }),
            Err(other) => Err(other),
        }
    }

    fn receive(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(Vec<u8>, Vec<OwnedFd>), LaunchError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(LaunchError::Timeout(timeout));
        }
        set_timeout(&self.fd, left).map_err(LaunchError::Read)?;
        match receive_message(self.fd.as_raw_fd()) {
            Ok(None) => Err(LaunchError::NoReport),
            Ok(Some(got)) => Ok(got),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Err(LaunchError::Timeout(timeout)),
            Err(e) => Err(LaunchError::Read(e)),
        }
    }
}

fn parse(bytes: &[u8]) -> Result<Report, LaunchError> {
    serde_json::from_slice(bytes).map_err(|e| LaunchError::Unreadable(e.to_string()))
}

fn set_timeout(fd: &OwnedFd, timeout: Duration) -> std::io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros().max(1) as libc::suseconds_t,
    };
    // SAFETY: setsockopt reads the timeval we pass during the call.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Room for [`MAX_FORWARDS`] descriptors in one control message.
fn control_len() -> usize {
    // SAFETY: CMSG_SPACE is a pure computation.
    #[allow(unsafe_code)]
    unsafe {
        libc::CMSG_SPACE((MAX_FORWARDS * std::mem::size_of::<RawFd>()) as u32) as usize
    }
}

/// Sends `report` with `fds` attached (the launcher's side).
pub fn send_report(fd: BorrowedFd<'_>, report: &Report, fds: &[RawFd]) -> std::io::Result<()> {
    let body = serde_json::to_vec(report).map_err(std::io::Error::other)?;
    send(fd, &body, fds)
}

/// What the node sends the launcher: the plan and the server's
/// environment. Both travel on the socket, not on the launcher's command
/// line or in its environment, where any process of the node's user could
/// read the server's arguments and secrets for as long as it runs; only the
/// server's own process holds them. No `Debug`: the values are secrets.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Orders {
    pub plan: Plan,
    pub env: Vec<(String, String)>,
}

/// Reads the node's orders (the launcher's side).
pub fn receive_orders(fd: BorrowedFd<'_>) -> Result<Orders, Refusal> {
    match receive_message(fd.as_raw_fd()) {
        Ok(Some((body, _))) => {
            serde_json::from_slice(&body).map_err(Refusal::failed("the node's plan is unreadable"))
        }
        Ok(None) => Err(Refusal::Cannot(
            "the node sent no plan (the launcher is started by the node)".into(),
        )),
        Err(e) => Err(Refusal::Cannot(format!(
            "cannot read the node's plan ({e}); the launcher is started by the node"
        ))),
    }
}

fn send(fd: BorrowedFd<'_>, body: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let fds = &fds[..fds.len().min(MAX_FORWARDS)];
    let mut iov = libc::iovec {
        iov_base: body.as_ptr() as *mut libc::c_void,
        iov_len: body.len(),
    };
    let mut control = vec![0u8; control_len()];
    // SAFETY: msghdr is plain data; every pointer in it refers to buffers
    // that live through the sendmsg call, and the control buffer is sized
    // by CMSG_SPACE for these descriptors.
    #[allow(unsafe_code)]
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let data_len = std::mem::size_of_val(fds) as u32;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(data_len) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), fds.len());
        }
        if libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One message and its descriptors; `None` at end of stream.
fn receive_message(fd: RawFd) -> std::io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut body = vec![0u8; MAX_REPORT];
    let mut control = vec![0u8; control_len()];
    let mut iov = libc::iovec {
        iov_base: body.as_mut_ptr().cast(),
        iov_len: body.len(),
    };
    // SAFETY: as in send_report; the kernel writes at most the lengths we
    // give, and we read descriptors only from SCM_RIGHTS headers it wrote.
    #[allow(unsafe_code)]
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(None);
        }
        let mut fds = Vec::new();
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let header = libc::CMSG_LEN(0) as usize;
                let count = ((*cmsg).cmsg_len as usize - header) / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        body.truncate(n as usize);
        Ok(Some((body, fds)))
    }
}
