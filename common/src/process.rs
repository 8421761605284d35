//! What a Spear binary sets up before it serves: logging to stderr, the
//! shutdown signal, and listen flags that take an address or `off`.

use std::net::SocketAddr;
use std::str::FromStr;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Human,
    Json,
}

/// A `--log-format` that is neither `human` nor `json`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("log format '{0}' is not known; use human or json")]
pub struct UnknownLogFormat(String);

impl FromStr for LogFormat {
    type Err = UnknownLogFormat;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "human" => Ok(LogFormat::Human),
            "json" => Ok(LogFormat::Json),
            other => Err(UnknownLogFormat(other.chars().take(32).collect())),
        }
    }
}

/// Logging could not be set up (another subscriber is already installed).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up logging: {0}")]
pub struct LoggingError(String);

/// Targets never logged below these levels, whatever `RUST_LOG` says:
/// rmcp's OAuth client logs authorization codes at `debug`; rmcp's
/// session loop logs every message a peer sends, whole, at `info` and
/// `debug`, and a `warn` for every error answer it carries, so a server,
/// or a client of the northbound endpoint, would write the node's log at
/// its own rate and size, outside the node's flood guards (the node says
/// what a server sent itself, bounded: spearlet's `mcp/server_log.rs`);
/// rmcp's HTTP server warns of every request it refuses (a web page's,
/// through DNS rebinding), which is the requester's rate again.
const CAPPED: &[&str] = &[
    "rmcp::transport::auth=info",
    "rmcp::service=error",
    "rmcp::transport::streamable_http_server=error",
];

/// How much is logged when `RUST_LOG` does not say: a daemon's `info`,
/// or, for an operator command, only its own errors (its answer is on
/// stdout and a failure is its one sentence on stderr; libraries' lines
/// about the same failure would only repeat it in their own terms), and
/// `-v` for info, `-vv` for debug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    Daemon,
    Command { verbose: u8 },
}

impl Verbosity {
    fn default_filter(self) -> &'static str {
        match self {
            Verbosity::Daemon | Verbosity::Command { verbose: 1 } => "info",
            Verbosity::Command { verbose: 0 } => "error,rmcp=off",
            Verbosity::Command { .. } => "debug",
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default by `verbosity`), with
/// the capped targets held at `info`; in colour only on a terminal.
pub fn init_logging(format: LogFormat, verbosity: Verbosity) -> Result<(), LoggingError> {
    init_logging_redacted(format, verbosity, |line| line.to_string())
}

/// `requested` with the [`CAPPED`] directives last, so they win; a
/// `RUST_LOG` that does not parse falls back to `info`.
fn capped_filter(requested: &str) -> tracing_subscriber::EnvFilter {
    let mut directives = vec![requested.to_string()];
    directives.extend(CAPPED.iter().map(|d| d.to_string()));
    tracing_subscriber::EnvFilter::try_new(directives.join(",")).unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            ["info"]
                .iter()
                .chain(CAPPED)
                .copied()
                .collect::<Vec<_>>()
                .join(","),
        )
    })
}

/// Rewrites one formatted log event before it is written.
pub type Redact = fn(&str) -> String;

/// [`init_logging`], passing every line through `redact` first: the node
/// removes the secrets it resolved, whichever crate logged them.
pub fn init_logging_redacted(
    format: LogFormat,
    verbosity: Verbosity,
    redact: Redact,
) -> Result<(), LoggingError> {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let requested =
        std::env::var("RUST_LOG").unwrap_or_else(|_| verbosity.default_filter().to_string());
    let filter = capped_filter(&requested);
    // Escape codes only where a terminal reads them, never in a file or pipe.
    let ansi = std::io::stderr().is_terminal();
    let shown = match (format, ansi) {
        (LogFormat::Json, _) => crate::text::printable_json,
        (LogFormat::Human, true) => crate::text::printable_styled,
        (LogFormat::Human, false) => crate::text::printable_lines,
    };
    let lines = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(move || RedactingStderr { redact, shown });
    let lines = match format {
        LogFormat::Human => lines.boxed(),
        LogFormat::Json => lines.json().boxed(),
    };
    // Traces, when the OTEL_* variables ask for them, named after the binary.
    let service = std::env::args()
        .next()
        .and_then(|arg0| {
            std::path::Path::new(&arg0)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "spear".into());
    tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .with(crate::telemetry::layer(&service))
        .try_init()
        .map_err(|e| LoggingError(e.to_string()))
}

/// Standard error behind a [`Redact`]. The formatter writes each event
/// whole, so each write is one event. Log lines carry text from peers (a
/// server's stderr, its errors), so `shown` escapes what a terminal
/// would obey in them (docs/security.md, "Text from peers"): in a JSON
/// line as JSON escapes, in a coloured one all but the formatter's own ESC.
struct RedactingStderr {
    redact: Redact,
    shown: fn(&str) -> std::borrow::Cow<'_, str>,
}

impl std::io::Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = (self.redact)(&String::from_utf8_lossy(buf));
        std::io::stderr().write_all((self.shown)(&line).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Resolves on Ctrl-C or SIGTERM, whichever comes first.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
        return;
    }
    let _ = ctrl_c.await;
}

/// A listen flag: `host:port`, or `off` for no listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    Off,
    At(SocketAddr),
}

impl Listen {
    /// The address to bind, if any.
    pub fn addr(self) -> Option<SocketAddr> {
        match self {
            Listen::Off => None,
            Listen::At(addr) => Some(addr),
        }
    }
}

/// A listen flag that is neither `host:port` nor `off`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not host:port or off")]
pub struct BadListen(String);

impl FromStr for Listen {
    type Err = BadListen;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "off" {
            return Ok(Listen::Off);
        }
        text.parse()
            .map(Listen::At)
            .map_err(|_| BadListen(text.chars().take(64).collect()))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Off => f.write_str("off"),
            Listen::At(addr) => addr.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    /// Whether an event of `level` at rmcp's OAuth target passes `requested`.
    fn auth_logs_at(requested: &str, level: tracing::Level) -> bool {
        let subscriber = tracing_subscriber::registry().with(capped_filter(requested));
        tracing::subscriber::with_default(subscriber, || match level {
            tracing::Level::DEBUG => {
                tracing::enabled!(target: "rmcp::transport::auth", tracing::Level::DEBUG)
            }
            _ => tracing::enabled!(target: "rmcp::transport::auth", tracing::Level::INFO),
        })
    }

    #[test]
    fn no_rust_log_lets_rmcp_log_authorization_codes() {
        for requested in [
            "debug",
            "trace",
            "rmcp=trace",
            "rmcp::transport::auth=trace",
            "nonsense==",
        ] {
            assert!(
                !auth_logs_at(requested, tracing::Level::DEBUG),
                "{requested}"
            );
            assert!(auth_logs_at(requested, tracing::Level::INFO), "{requested}");
        }
    }

    #[test]
    fn listen_flags_take_an_address_or_off() {
        assert_eq!("off".parse::<Listen>(), Ok(Listen::Off));
        let at: Listen = "127.0.0.1:9300".parse().unwrap();
        assert_eq!(at.addr(), Some(SocketAddr::from(([127, 0, 0, 1], 9300))));
        assert_eq!(
            "localhost".parse::<Listen>().unwrap_err().to_string(),
            "'localhost' is not host:port or off"
        );
        assert_eq!(
            "xml".parse::<LogFormat>().unwrap_err().to_string(),
            "log format 'xml' is not known; use human or json"
        );
    }
}

/// The exit code of a process whose reader went away (128 + SIGPIPE), as
/// a shell reports it.
pub const CLOSED_PIPE_EXIT: i32 = 141;

/// Makes a CLI end quietly when whoever reads its output stops reading
/// (`sms status | head`): Rust ignores SIGPIPE, so `println!` panics on
/// the closed pipe with a backtrace hint where a Unix tool just exits. The
/// panic hook exits with [`CLOSED_PIPE_EXIT`] for that one panic and leaves
/// every other one to the hook before it.
pub fn quiet_on_closed_stdout() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(CLOSED_PIPE_EXIT);
        }
        previous(info);
    }));
}
