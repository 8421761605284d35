//! The 2026-07-28 way of asking for input: a `tools/call` answered with an
//! `input_required` result instead of a request to the client. The node
//! fulfils what it can (elicitation, by the session's policy; roots, with
//! none) and the caller retries the call with the responses and the
//! server's opaque `requestState`, a bounded number of rounds.
// Roots are deprecated after 2026-07-28 (SEP-2577); a server may still ask.
#![allow(deprecated)]

use rmcp::model::{InputRequest, InputRequiredResult, InputResponses, ListRootsResult};
use serde_json::Value;

use super::elicitation::ElicitationPolicy;
use super::error::McpError;
use super::server_log::ServerLog;

/// Rounds of `input_required` a call may take before it is given up: a
/// server that keeps asking must not hold a call (and a slot) forever.
pub const MAX_ROUNDS: usize = 10;

/// The responses to `asked` and the state to echo on the retry.
pub async fn fulfil(
    log: &ServerLog,
    policy: ElicitationPolicy,
    asked: InputRequiredResult,
) -> Result<(Option<InputResponses>, Option<String>), McpError> {
    let requests = asked.input_requests.unwrap_or_default();
    if requests.is_empty() && asked.request_state.is_none() {
        return Err(McpError::Server(
            "the server asked for input but named nothing to answer".into(),
        ));
    }
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let response = match request {
            InputRequest::Elicitation(request) => {
                to_value(policy.answer(log, request.params).await)?
            }
            InputRequest::ListRoots(_) => to_value(ListRootsResult::default())?,
            InputRequest::CreateMessage(_) => {
                return Err(McpError::Server(
                    "the server asked the node to sample a model (sampling/createMessage), \
                     which nodes do not offer to servers"
                        .into(),
                ))
            }
            #[allow(unreachable_patterns)]
            _ => {
                return Err(McpError::Server(
                    "the server asked for a kind of input this node does not know".into(),
                ))
            }
        };
        responses.insert(key, response);
    }
    Ok((
        (!responses.is_empty()).then_some(responses),
        asked.request_state,
    ))
}

fn to_value<T: serde::Serialize>(value: T) -> Result<Value, McpError> {
    serde_json::to_value(value)
        .map_err(|e| McpError::Server(format!("cannot encode an answer: {e}")))
}
