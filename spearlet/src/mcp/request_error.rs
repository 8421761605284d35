//! What a failed request to a server means for its connection. rmcp
//! reports a request whose own HTTP exchange failed (a response head too
//! large, a body that is not JSON-RPC, an answer stream the node cut at
//! its bound, `stream_budget`) as the transport's error even while the
//! session is up: [`McpClient::request_error`] fails that request only,
//! in a sentence without URLs or body bytes; [`service_error`] maps the
//! rest.

use super::client::McpClient;
use super::error::McpError;

impl McpClient {
    /// `error` of one request. rmcp reports a request whose own HTTP
    /// exchange failed (a response head too large, an answer stream the
    /// node cut at its bound, `stream_budget`) as the transport's error
    /// while the session is still up: that fails the request only.
    pub(super) fn request_error(&self, error: rmcp::ServiceError) -> McpError {
        let alive = self.is_alive();
        match error {
            rmcp::ServiceError::TransportClosed if alive => McpError::AnswerCut,
            // The server cannot be reached at all (it exited, or its
            // address refuses): that is the connection's end, so the slot
            // reconnects after its backoff and reports why.
            rmcp::ServiceError::TransportSend(sent)
                if alive && !unreachable(sent.error.as_ref()) =>
            {
                match super::auth_failure::auth_failure(sent.error.as_ref()) {
                    Some(sentence) => McpError::Auth(sentence),
                    None => McpError::Request(chain(sent.error.as_ref())),
                }
            }
            other => service_error(other),
        }
    }
}

/// Whether `error` is a failure to connect to the server at all, rather
/// than a failure of one exchange on a reachable server.
fn unreachable(error: &(dyn std::error::Error + 'static)) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(StreamableHttpError::Client(e)) =
            error.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return e.is_connect();
        }
        if let Some(e) = error.downcast_ref::<reqwest::Error>() {
            return e.is_connect();
        }
        current = error.source();
    }
    false
}

/// `error` and its causes, as one sentence, without the URL (a path or
/// query may carry secrets) or the bytes of a body that is not JSON.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut current = Some(error);
    while let Some(error) = current {
        match error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            Some(StreamableHttpError::Client(e)) => {
                return crate::http_client::describe_ref(e);
            }
            // rmcp's text ends with a preview of the body, which may be
            // any bytes (a compressed body arrives as it is).
            Some(StreamableHttpError::UnexpectedServerResponse(text))
                if text.starts_with("could not parse JSON response") =>
            {
                return "the server's answer is not a JSON-RPC message (the node decompresses nothing, so a compressed body is not one)".into();
            }
            _ => {}
        }
        current = error.source();
    }
    error.to_string()
}

pub(super) fn service_error(error: rmcp::ServiceError) -> McpError {
    if let rmcp::ServiceError::TransportSend(sent) = &error {
        if let Some(sentence) = super::auth_failure::auth_failure(sent.error.as_ref()) {
            return McpError::Auth(sentence);
        }
    }
    match error {
        rmcp::ServiceError::McpError(e) => McpError::Server(e.message.to_string()),
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) => {
            McpError::Closed
        }
        rmcp::ServiceError::Timeout { timeout } => McpError::Timeout {
            what: "request",
            after: timeout,
        },
        other => McpError::Server(other.to_string()),
    }
}
