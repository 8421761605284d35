//! The `spearlet` binary: argument parsing only; the logic is in the library.
#![forbid(unsafe_code)]

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = spearlet::cli::Cli::parse();
    let code = match spearlet::cli::run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("spearlet: {error:#}");
            1
        }
    };
    std::process::exit(code);
}
