//! The `spearlet` binary: argument parsing only; the logic is in the library.
#![forbid(unsafe_code)]

use clap::Parser;
use spear_common::safe_eprintln;

fn main() {
    // The sandbox launcher (`spearlet sandbox-exec`), before any
    // thread exists: new user namespaces need a single-threaded process.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = spear_sandbox::launcher::run_if_asked(&args) {
        std::process::exit(code);
    }
    // No process of the node's user outside a sandbox reads the node's
    // environment (LLM keys) or memory, or attaches to it.
    spear_sandbox::launcher::make_non_dumpable();
    spear_common::process::quiet_on_closed_stdout();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            safe_eprintln!("spearlet: cannot start the async runtime: {error}");
            std::process::exit(1);
        }
    };
    std::process::exit(runtime.block_on(run()));
}

async fn run() -> i32 {
    let cli = spearlet::cli::Cli::parse();
    match spearlet::cli::run(cli).await {
        Ok(code) => code,
        Err(error) => {
            // Each cause once: a sentence that already says its cause
            // (thiserror's "{0}") is not followed by it again.
            let error: &(dyn std::error::Error + 'static) = error.as_ref();
            safe_eprintln!("spearlet: {}", spear_common::text::causes(error));
            1
        }
    }
}
