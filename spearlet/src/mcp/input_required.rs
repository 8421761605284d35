//! The 2026-07-28 way of asking for input: a `tools/call` answered with an
//! `input_required` result instead of a request to the client. The node
//! fulfils what it can and the caller retries the call with the responses
//! and the server's opaque `requestState`, a bounded number of rounds:
//! elicitation and sampling by the northbound client of the call, when
//! there is one that can (`way_back`), else elicitation by the session's
//! policy; roots, with none.
// Roots are deprecated after 2026-07-28 (SEP-2577); a server may still ask.
#![allow(deprecated)]

use rmcp::model::{InputRequest, InputRequiredResult, InputResponses, ListRootsResult};
use serde_json::Value;

use super::elicitation::ElicitationPolicy;
use super::error::McpError;
use super::server_log::ServerLog;
use super::way_back::WayBack;

/// Rounds of `input_required` a call may take before it is given up: a
/// server that keeps asking must not hold a call (and a slot) forever.
pub const MAX_ROUNDS: usize = 10;

/// Who answers a server's questions.
pub struct Asking<'a> {
    pub log: &'a ServerLog,
    pub policy: ElicitationPolicy,
    /// The northbound client of the call, if there is one.
    pub client: Option<&'a dyn WayBack>,
}

/// The responses to `asked` and the state to echo on the retry.
pub async fn fulfil(
    asking: Asking<'_>,
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
            InputRequest::Elicitation(request) => to_value(asking.elicit(request.params).await)?,
            InputRequest::ListRoots(_) => to_value(ListRootsResult::default())?,
            InputRequest::CreateMessage(request) => {
                let answer = match asking.client {
                    Some(client) => client.sample(request.params).await,
                    None => None,
                };
                match answer {
                    Some(Ok(answer)) => to_value(answer)?,
                    Some(Err(error)) => return Err(McpError::Rpc(error)),
                    None => return Err(McpError::Server(
                        "the server asked the node to sample a model (sampling/createMessage), \
                             which nodes do not offer to servers"
                            .into(),
                    )),
                }
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

impl Asking<'_> {
    /// The client's answer, if it gives one; else the policy's.
    async fn elicit(&self, request: rmcp::model::ElicitRequestParams) -> rmcp::model::ElicitResult {
        if let Some(client) = self.client {
            if let Some(answer) = client.elicit(request.clone()).await {
                return answer;
            }
        }
        self.policy.answer(self.log, request).await
    }
}

fn to_value<T: serde::Serialize>(value: T) -> Result<Value, McpError> {
    serde_json::to_value(value)
        .map_err(|e| McpError::Server(format!("cannot encode an answer: {e}")))
}
