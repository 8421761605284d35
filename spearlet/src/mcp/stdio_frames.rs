//! The MCP transport over a stdio server's pipes: one JSON-RPC message a
//! line, each line at most rmcp's [`DEFAULT_MAX_LINE_LENGTH`] (16 MiB; a
//! longer one is dropped and the session goes on), and every line weighed
//! by the session's [`ListBound`] before it is parsed, so a tool list past
//! the bound is never built (rmcp's own stdio transport parses a line
//! before anyone sees it). Lines that are not JSON-RPC are skipped, as
//! rmcp does.

use std::sync::Arc;

use bytes::BytesMut;
use futures::{Sink, Stream, StreamExt};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::{
    JsonRpcMessageCodec, JsonRpcMessageCodecError, DEFAULT_MAX_LINE_LENGTH,
};
use rmcp::RoleClient;
use tokio::process::{ChildStdin, ChildStdout};
use tokio_util::codec::{
    AnyDelimiterCodec, AnyDelimiterCodecError, Decoder, FramedRead, FramedWrite,
};

use super::list_bound::ListBound;
use super::server_log::ServerLog;

/// `stdout` and `stdin` of a server as the sink and stream a session is
/// served over.
pub fn pipes(
    stdout: ChildStdout,
    stdin: ChildStdin,
    list: Arc<ListBound>,
    log: Arc<ServerLog>,
) -> (
    impl Sink<TxJsonRpcMessage<RoleClient>, Error = JsonRpcMessageCodecError> + Send + Unpin + 'static,
    impl Stream<Item = RxJsonRpcMessage<RoleClient>> + Send + Unpin + 'static,
) {
    let frames = Frames {
        lines: AnyDelimiterCodec::new_with_max_length(
            b"\n".to_vec(),
            Vec::new(),
            DEFAULT_MAX_LINE_LENGTH,
        ),
        list,
        log,
    };
    let messages =
        FramedRead::new(stdout, frames).filter_map(|item| std::future::ready(item.ok().flatten()));
    (
        FramedWrite::new(
            stdin,
            JsonRpcMessageCodec::<TxJsonRpcMessage<RoleClient>>::default(),
        ),
        messages,
    )
}

/// Lines to messages: `None` for a line dropped (too long, not JSON-RPC).
struct Frames {
    lines: AnyDelimiterCodec,
    list: Arc<ListBound>,
    log: Arc<ServerLog>,
}

impl Frames {
    fn message(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        if let Some(refused) = self.list.weigh(line) {
            return Some(refused);
        }
        match serde_json::from_slice(line) {
            Ok(message) => Some(message),
            Err(error) => {
                tracing::debug!(%error, "a line from the server is not a JSON-RPC message; skipped");
                None
            }
        }
    }
}

impl Decoder for Frames {
    type Item = Option<RxJsonRpcMessage<RoleClient>>;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Self::Item>, std::io::Error> {
        match self.lines.decode(buf) {
            Ok(Some(line)) => Ok(Some(self.message(&line))),
            Ok(None) => Ok(None),
            Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => {
                self.log.request(|server_id| {
                    tracing::warn!(server_id, "the server sent a message longer than {DEFAULT_MAX_LINE_LENGTH} bytes; dropped")
                });
                Ok(Some(None))
            }
            Err(AnyDelimiterCodecError::Io(error)) => Err(error),
        }
    }

    /// A last line without its newline is an incomplete message: dropped.
    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Self::Item>, std::io::Error> {
        let decoded = self.decode(buf)?;
        if decoded.is_none() {
            buf.clear();
        }
        Ok(decoded)
    }
}
