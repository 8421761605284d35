//! The server's view of the file system, in its own mount namespace:
//! nothing propagates back to the host; a `/proc` of its own PID namespace
//! (it sees its own processes, not the node's or a sibling's); a private
//! `/tmp` as its scratch space and `HOME`; an empty `/run` (no host
//! sockets), with the `/etc/hosts` that names its destinations; the
//! node's own paths and the host's secrets bound over by a file or
//! directory the server cannot open.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::plan::{Plan, HOME, HOST_SECRETS, SCRATCH};
use crate::refusal::Refusal;
use crate::report::Report;

fn c(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other(format!("{} holds a NUL byte", path.display())))
}

fn mount(
    source: &str,
    target: &Path,
    fstype: &str,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> std::io::Result<()> {
    let source = CString::new(source).map_err(std::io::Error::other)?;
    let target = c(target)?;
    let fstype = CString::new(fstype).map_err(std::io::Error::other)?;
    let data = data
        .map(CString::new)
        .transpose()
        .map_err(std::io::Error::other)?;
    let data_ptr = data
        .as_ref()
        .map_or(std::ptr::null(), |d| d.as_ptr().cast());
    // SAFETY: every pointer is a live NUL-terminated string (or null for
    // data), read by the kernel during the call only.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data_ptr,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// What masked paths become: an empty file and an empty directory in
/// the private `/run`, both mode 0 and owned by the sandbox's root, so the
/// server (never root there) can open neither. One bind mount hides a
/// path, cheaper than a tmpfs per directory.
const MASKED_FILE: &str = "/run/spear-masked-file";
const MASKED_DIR: &str = "/run/spear-masked-dir";

fn make_mask_sources() -> Result<(), Refusal> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o000)
        .open(MASKED_FILE)
        .map_err(Refusal::cannot(format!("make {MASKED_FILE}")))?;
    std::fs::DirBuilder::new()
        .mode(0o000)
        .create(MASKED_DIR)
        .map_err(Refusal::cannot(format!("make {MASKED_DIR}")))
}

/// Hides `path` under the mode-0 file or directory. A path that does not
/// exist needs no mask.
fn mask(path: &Path) -> Result<(), Refusal> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let source = if meta.is_dir() {
        MASKED_DIR
    } else {
        MASKED_FILE
    };
    mount(source, path, "", libc::MS_BIND, None)
        .map_err(Refusal::cannot(format!("hide {}", path.display())))
}

/// Granted paths the private `/tmp` and `/run` would hide: opened before
/// those mounts, bound back at the same place after them.
fn hidden_grants(plan: &Plan) -> Vec<(std::path::PathBuf, std::fs::File)> {
    let mut kept = Vec::new();
    let granted = plan.read.iter().chain(&plan.write).chain(plan.cwd.iter());
    for path in granted {
        let under = [SCRATCH, "/run"]
            .iter()
            .any(|top| path.starts_with(top) && path != Path::new(top));
        if !under
            || kept
                .iter()
                .any(|(p, _): &(std::path::PathBuf, _)| p == path)
        {
            continue;
        }
        use std::os::unix::fs::OpenOptionsExt;
        if let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(path)
        {
            kept.push((path.clone(), file));
        }
    }
    kept
}

/// Binds `kept` back over the new mounts, at their own paths.
fn rebind(kept: Vec<(std::path::PathBuf, std::fs::File)>) -> Result<(), Refusal> {
    use std::os::fd::AsRawFd;
    for (path, file) in kept {
        let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(false);
        let made = if is_dir {
            std::fs::create_dir_all(&path)
        } else {
            path.parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&path, b""))
        };
        made.map_err(Refusal::cannot(format!(
            "make {} inside the sandbox",
            path.display()
        )))?;
        let source = format!("/proc/self/fd/{}", file.as_raw_fd());
        mount(&source, &path, "", libc::MS_BIND | libc::MS_REC, None).map_err(Refusal::cannot(
            format!("give the server {}", path.display()),
        ))?;
    }
    Ok(())
}

/// Lays out the server's file system. Runs in the new mount namespace,
/// as the second process of the new PID namespace.
pub fn setup(plan: &Plan, report: &mut Report) -> Result<(), Refusal> {
    let root = Path::new("/");
    let kept = hidden_grants(plan);
    mount("", root, "", libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(Refusal::cannot("make the mount namespace private"))?;
    let nosuid = libc::MS_NOSUID | libc::MS_NODEV;
    match mount(
        "proc",
        Path::new("/proc"),
        "proc",
        nosuid | libc::MS_NOEXEC,
        None,
    ) {
        Ok(()) => report.push("pid namespace", true, "a /proc of its own processes only"),
        Err(error) => {
            // A host whose /proc has masked entries (some container
            // runtimes) refuses a new proc mount: no /proc at all then.
            mount(
                "tmpfs",
                Path::new("/proc"),
                "tmpfs",
                nosuid | libc::MS_NOEXEC | libc::MS_RDONLY,
                Some("size=0,mode=0555"),
            )
            .map_err(Refusal::cannot("hide /proc"))?;
            report.push(
                "pid namespace",
                true,
                format!("no /proc (a private one could not be mounted: {error})"),
            );
        }
    }
    let scratch = format!("size={}m,mode=0700", plan.scratch_mb.max(1));
    mount("tmpfs", Path::new(SCRATCH), "tmpfs", nosuid, Some(&scratch))
        .map_err(Refusal::cannot("mount the scratch directory"))?;
    std::fs::create_dir_all(HOME).map_err(Refusal::cannot(format!("make {HOME}")))?;
    // /run: no host sockets (docker's, systemd's); it keeps the hosts file.
    let run = Path::new("/run");
    mount(
        "tmpfs",
        run,
        "tmpfs",
        nosuid | libc::MS_NOEXEC,
        Some("size=64k,mode=0755"),
    )
    .map_err(Refusal::cannot("mount an empty /run"))?;
    let hosts = run.join("spear-hosts");
    std::fs::write(&hosts, plan.hosts_file())
        .map_err(Refusal::cannot("write the sandbox's hosts file"))?;
    mount(
        &hosts.to_string_lossy(),
        Path::new("/etc/hosts"),
        "",
        libc::MS_BIND,
        None,
    )
    .map_err(Refusal::cannot("give the sandbox its /etc/hosts"))?;
    make_mask_sources()?;
    rebind(kept)?;
    mount(
        "",
        run,
        "",
        libc::MS_REMOUNT | libc::MS_RDONLY | nosuid | libc::MS_NOEXEC,
        None,
    )
    .map_err(Refusal::cannot("make /run read-only"))?;
    let mut hidden = 0;
    for path in plan
        .mask
        .iter()
        .map(|p| p.as_path())
        .chain(HOST_SECRETS.iter().map(Path::new))
    {
        if path.exists() {
            hidden += 1;
        }
        mask(path)?;
    }
    report.push(
        "mount namespace",
        true,
        format!(
            "private /tmp ({} MiB) as HOME, empty /run, {hidden} node and host paths hidden",
            plan.scratch_mb
        ),
    );
    Ok(())
}
