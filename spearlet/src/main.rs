//! The `spearlet` binary: argument parsing only; the logic is in the library.

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = spearlet::cli::Cli::parse();
    if let Err(error) = spearlet::cli::run(cli).await {
        eprintln!("spearlet: {error:#}");
        std::process::exit(1);
    }
}
