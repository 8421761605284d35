//! A model provider that replays a recorded conversation (see the crate's
//! `replay` module), for running Spear offline (the README's main job when
//! no model endpoint is named) and in end-to-end tests. Speaks OpenAI chat
//! completions and Anthropic messages, streaming or not.
//!
//! `replay-llm --recording FILE [--listen 127.0.0.1:0] [--ready-file F]
//! [--delay-ms N] [--log-requests FILE]`: the ready file receives the OpenAI base URL once the
//! port is bound; `--delay-ms` waits before each answer, like a model would;
//! `--log-requests` appends every request to FILE as a JSON line.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use spear_scripted_model::{Recording, ScriptedModel, Source};

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let mut recording = None;
    let mut listen: SocketAddr = "127.0.0.1:0".parse()?;
    let mut ready_file = None;
    let mut delay = Duration::ZERO;
    let mut log = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--recording" => recording = Some(value()?),
            "--listen" => listen = value()?.parse().context("--listen is not host:port")?,
            "--ready-file" => ready_file = Some(value()?),
            "--delay-ms" => delay = Duration::from_millis(value()?.parse()?),
            "--log-requests" => log = Some(value()?),
            other => bail!("unknown argument {other}; see the doc comment of replay-llm"),
        }
    }
    let path = recording.context("--recording FILE is required")?;
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let recording = Recording::parse(&text).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    let model = ScriptedModel::start(Source::Replay(recording), listen, delay)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    if let Some(path) = log {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {path}"))?;
        model.log_requests(file);
    }
    let url = model.openai_url();
    eprintln!("replay-llm: replaying {path} on {url}");
    if let Some(ready) = ready_file {
        // Written whole, then renamed: a reader never sees a partial file.
        let tmp = format!("{ready}.tmp");
        std::fs::write(&tmp, &url)?;
        std::fs::rename(&tmp, &ready)?;
    }
    // Serves until killed; refused requests are said on stderr.
    std::future::pending::<()>().await;
    Ok(())
}
