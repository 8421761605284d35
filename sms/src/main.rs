//! The `sms` binary: argument parsing only; the logic is in the library.
#![forbid(unsafe_code)]

use clap::Parser;
use spear_common::safe_eprintln;

#[tokio::main]
async fn main() {
    spear_common::process::quiet_on_closed_stdout();
    let cli = spear_sms::cli::Cli::parse();
    let code = match spear_sms::cli::run(cli).await {
        Ok(code) => code,
        Err(error) => {
            // Each cause once: a sentence that already says its cause
            // (thiserror's "{0}") is not followed by it again.
            let error: &(dyn std::error::Error + 'static) = error.as_ref();
            safe_eprintln!("sms: {}", spear_common::text::causes(error));
            1
        }
    };
    std::process::exit(code);
}
