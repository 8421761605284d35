//! A node whose audit log the disk refuses (docs/trust.md, "A log that
//! cannot be written"), on the real binaries: a full tmpfs under the
//! node's audit directory.

use std::path::Path;
use std::time::Duration;

use spear_tests::audit_trail::{audit, on_disk, routed_again, seqs, verify};
use spear_tests::trust::{invoke_on, trust_cluster, TrustSetup};
use spear_tests::wait::eventually;

/// A small tmpfs over a directory, unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn over(dir: &Path, size: &str) -> SmallDisk {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "this test needs root to mount a small tmpfs");
        SmallDisk(dir.to_path_buf())
    }

    /// Fills it: a file grown until the disk says it is full.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut file = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{e}"));
        let block = vec![0u8; 4096];
        while file
            .write_all(&block)
            .and_then(|()| file.sync_data())
            .is_ok()
        {}
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// A node whose audit log cannot be written runs nothing until it can:
/// SMS is told why, in a sentence; once the disk has room again the kept
/// records are written, in order, and runs go on.
#[test]
fn a_node_that_cannot_write_its_audit_log_refuses_runs_until_it_can() {
    let (mut c, _dir) = trust_cluster("audit-full", TrustSetup::default());
    assert_eq!(invoke_on(&c, "node-a")["ok"], true);
    let audit_dir = c.node.state_dir.join("audit");
    c.node.proc.stop();
    let kept = c.node.state_dir.join("audit-kept");
    std::fs::rename(&audit_dir, &kept).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(&audit_dir).unwrap_or_else(|e| panic!("{e}"));
    let disk = SmallDisk::over(&audit_dir, "1m");
    for entry in std::fs::read_dir(&kept)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
    {
        std::fs::copy(entry.path(), audit_dir.join(entry.file_name()))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    c.node.start_in_place();
    routed_again(&c);
    let filler = disk.fill();
    let refused = eventually("node-a to refuse runs", Duration::from_secs(30), || {
        let (code, out, err) = c.sms.client(&["invoke", "echo", "--node", "node-a"]);
        let said = format!("{out}{err}");
        (code != 0 && said.contains("cannot write its audit log"))
            .then_some(said.clone())
            .ok_or(said)
    });
    assert!(
        refused.contains("refuses runs until the log can be written"),
        "{refused}"
    );
    std::fs::remove_file(filler).unwrap_or_else(|e| panic!("{e}"));
    eventually("node-a to run again", Duration::from_secs(30), || {
        let (code, out, err) = c
            .sms
            .client(&["invoke", "--json", "echo", "--node", "node-a"]);
        (code == 0).then_some(()).ok_or(format!("{out}{err}"))
    });
    let state_dir = c.node.state_dir.clone();
    eventually("every record at SMS", Duration::from_secs(20), || {
        let written = seqs(&on_disk(&state_dir));
        let held = seqs(&audit(&c, &["--node", "node-a"]));
        (written.is_subset(&held) && !written.is_empty())
            .then_some(())
            .ok_or(format!("{held:?} vs {written:?}"))
    });
    let (code, out) = verify(&c);
    assert_eq!(code, 0, "{out}");
    c.node.proc.stop();
    drop(disk);
}
