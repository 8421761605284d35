//! The console tests' browser: `tests/console/driver.py` runs a scenario
//! in Debian's chromium through Playwright (both installed by
//! scripts/setup.sh) against an SMS's console, and answers what it saw.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::procs::SmsProc;
use crate::tasks::{repo_file, CONSOLE_TOKEN, VIEWER_TOKEN};

/// The venv's Python with Playwright.
fn python() -> PathBuf {
    crate::peers::venv_python(
        "SPEAR_VENV_BROWSER",
        "venv-browser",
        "Playwright (it also installs chromium)",
    )
}

/// Runs `scenario` against `sms`'s console with `env`; what the driver
/// reported. Screenshots go to `$SPEAR_CONSOLE_SHOTS` when it is set
/// (docs/console/ holds the ones the docs show).
pub fn drive(scenario: &str, sms: &SmsProc, env: &[(&str, String)]) -> Value {
    assert!(
        !sms.console.is_empty(),
        "this SMS serves no console (no token to sign in with)"
    );
    let mut command = Command::new(python());
    command
        .arg(repo_file("tests/console/driver.py"))
        .arg(scenario)
        .env("CONSOLE_URL", &sms.console)
        .env("ADMIN_TOKEN", CONSOLE_TOKEN)
        .env("VIEWER_TOKEN", VIEWER_TOKEN);
    if let Ok(dir) = std::env::var("SPEAR_CONSOLE_SHOTS") {
        command.env("SHOTS_DIR", dir);
    } else {
        command.env_remove("SHOTS_DIR");
    }
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("run the browser driver: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "scenario {scenario} failed in the browser:\n{stderr}\n{stdout}\n----- sms -----\n{}",
        sms.proc.log()
    );
    let line = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("the driver reported nothing:\n{stdout}\n{stderr}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("driver result: {e}: {line}"))
}
