//! `spearlet guest run --replay FILE`: the model is `replay-llm` (built
//! beside `spearlet`) replaying a recorded conversation, so an agent runs
//! offline with only its model's words recorded.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running replay-llm, stopped when dropped.
pub struct Replay {
    child: Child,
    pub url: String,
}

impl Drop for Replay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why the replay did not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("--replay needs replay-llm beside spearlet ({0}); build it with `cargo build --bins`, or set OPENAI_BASE_URL instead")]
    Missing(PathBuf),
    #[error("replay-llm did not start within 10s: {0}")]
    NotReady(String),
    #[error("cannot start replay-llm: {0}")]
    Io(#[from] std::io::Error),
}

/// Starts replay-llm on `recording`, its ready file in `work`.
pub fn start(recording: &Path, work: &Path) -> Result<Replay, ReplayError> {
    let exe = std::env::current_exe()?;
    let binary = exe.with_file_name("replay-llm");
    if !binary.is_file() {
        return Err(ReplayError::Missing(binary));
    }
    let ready = work.join("replay.ready");
    let child = Command::new(&binary)
        .arg("--recording")
        .arg(recording)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut replay = Replay {
        child,
        url: String::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(url) = std::fs::read_to_string(&ready) {
            if !url.trim().is_empty() {
                replay.url = url.trim().to_string();
                return Ok(replay);
            }
        }
        if let Ok(Some(status)) = replay.child.try_wait() {
            return Err(ReplayError::NotReady(format!(
                "it exited ({status}); is {} a recording?",
                recording.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(ReplayError::NotReady(recording.display().to_string()))
}
