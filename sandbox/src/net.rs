//! The server's network namespace: loopback only, and one listening
//! socket per declared destination, which the launcher hands to the node
//! to forward (the node resolves the destination once and applies its
//! egress guard). Nothing else is routable from inside.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};

use crate::plan::Plan;
use crate::refusal::Refusal;
use crate::report::Report;

/// `ioctl(SIOCSIFFLAGS)`/`SIOCSIFADDR` on the loopback interface (or an
/// alias of it, `lo:N`).
fn ifreq(name: &str) -> Result<libc::ifreq, Refusal> {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    #[allow(unsafe_code)]
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= req.ifr_name.len() {
        return Err(Refusal::Cannot(format!(
            "interface name {name} is too long"
        )));
    }
    for (slot, byte) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *slot = byte as libc::c_char;
    }
    Ok(req)
}

fn ioctl(socket: &OwnedFd, request: libc::Ioctl, req: &mut libc::ifreq) -> std::io::Result<()> {
    // SAFETY: `req` is a valid ifreq for these interface ioctls, and
    // `socket` an open socket.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), request, req as *mut libc::ifreq) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn control_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: socket(2) returns a new descriptor we then own.
    #[allow(unsafe_code)]
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nothing else owns.
    #[allow(unsafe_code)]
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

fn loopback_up(socket: &OwnedFd) -> Result<(), Refusal> {
    let mut req = ifreq("lo")?;
    ioctl(socket, libc::SIOCGIFFLAGS as libc::Ioctl, &mut req)
        .map_err(Refusal::cannot("read the loopback interface"))?;
    // SAFETY: the flags member is the one SIOCGIFFLAGS filled in.
    #[allow(unsafe_code)]
    unsafe {
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    ioctl(socket, libc::SIOCSIFFLAGS as libc::Ioctl, &mut req)
        .map_err(Refusal::cannot("bring the loopback interface up"))
}

/// Puts a non-loopback IPv4 destination on an alias of `lo`, so the
/// server's connection to it stays inside and meets its listener.
fn add_alias(socket: &OwnedFd, index: usize, ip: Ipv4Addr) -> Result<(), Refusal> {
    let mut req = ifreq(&format!("lo:{index}"))?;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in fits in the union's sockaddr; we write it whole.
    #[allow(unsafe_code)]
    unsafe {
        std::ptr::write(
            (&mut req.ifr_ifru.ifru_addr as *mut libc::sockaddr).cast::<libc::sockaddr_in>(),
            addr,
        );
    }
    ioctl(socket, libc::SIOCSIFADDR as libc::Ioctl, &mut req).map_err(Refusal::cannot(format!(
        "give the sandbox the address {ip}"
    )))
}

/// Brings loopback up and binds the destinations' listeners, in plan
/// order.
pub fn setup(plan: &Plan, report: &mut Report) -> Result<Vec<TcpListener>, Refusal> {
    let socket = control_socket().map_err(Refusal::cannot("open a control socket"))?;
    loopback_up(&socket)?;
    let mut listeners = Vec::with_capacity(plan.forwards.len());
    let mut aliases = 0;
    for forward in &plan.forwards {
        if !forward.listen.is_loopback() && !listeners_have(&listeners, forward.listen) {
            aliases += 1;
            add_alias(&socket, aliases, forward.listen)?;
        }
        let listener = TcpListener::bind(SocketAddrV4::new(forward.listen, forward.port)).map_err(
            Refusal::cannot(format!(
                "listen for {}:{} inside the sandbox",
                forward.host, forward.port
            )),
        )?;
        listeners.push(listener);
    }
    let detail = if plan.forwards.is_empty() {
        "no network: loopback only".to_string()
    } else {
        let list: Vec<String> = plan
            .forwards
            .iter()
            .map(|f| format!("{}:{}", f.host, f.port))
            .collect();
        format!("loopback, and {} through the node", list.join(", "))
    };
    report.push("network namespace", true, detail);
    Ok(listeners)
}

fn listeners_have(listeners: &[TcpListener], ip: Ipv4Addr) -> bool {
    listeners.iter().any(|l| {
        l.local_addr()
            .is_ok_and(|a| a.ip() == std::net::IpAddr::V4(ip))
    })
}
