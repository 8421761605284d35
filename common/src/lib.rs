//! Code both Spear binaries run, one home per idea.
//!
//! - [`backoff`]: the jittered exponential [`Backoff`] every reconnecting
//!   or retrying loop uses (SMS following etcd, nodes following SMS, nodes
//!   reconnecting MCP servers).
//! - [`process`]: what a binary sets up before it serves: logging
//!   ([`LogFormat`]), the shutdown signal, and `ADDR|off` listen flags
//!   ([`Listen`]).
//! - [`text`]: cutting text at a byte budget without splitting a character,
//!   and escaping what a terminal would obey in text from peers.
//! - [`terminal`]: the one way the commands print, every line escaped
//!   ([`safe_println!`] and its siblings, [`terminal::print_json`]).
//! - [`insecure`]: what counts as loopback, and the repeated warning of a
//!   process serving or calling in plaintext beyond it.
//! - [`sse`]: an incremental Server-Sent Events parser, used for streamed
//!   model answers and the legacy MCP HTTP+SSE transport.
//! - [`telemetry`]: OpenTelemetry traces over OTLP when the `OTEL_*`
//!   variables ask for them, and the W3C trace context passed on.
//!
//! Wire contracts between SMS and nodes live in `spear-proto`, not here.
#![forbid(unsafe_code)]

pub mod audit_export;
pub mod backoff;
pub mod clock;
pub mod insecure;
pub mod metrics;
pub mod process;
pub mod sse;
pub mod telemetry;
pub mod terminal;
pub mod text;

pub use backoff::Backoff;
pub use process::{
    init_logging, init_logging_redacted, shutdown_signal, Listen, LogFormat, Redact, Verbosity,
};
