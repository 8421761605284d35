//! The `spearlet` binary: argument parsing only; the logic is in the library.
#![forbid(unsafe_code)]

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = spearlet::cli::Cli::parse();
    let code = match spearlet::cli::run(cli).await {
        Ok(code) => code,
        Err(error) => {
            // Each cause once: a sentence that already says its cause
            // (thiserror's "{0}") is not followed by it again.
            let error: &(dyn std::error::Error + 'static) = error.as_ref();
            eprintln!("spearlet: {}", spear_common::text::causes(error));
            1
        }
    };
    std::process::exit(code);
}
