//! The `sms` binary: argument parsing only; the logic is in the library.
#![forbid(unsafe_code)]

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = spear_sms::cli::Cli::parse();
    let code = match spear_sms::cli::run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sms: {error:#}");
            1
        }
    };
    std::process::exit(code);
}
