//! [`client_result`]: what an MCP client of the northbound endpoint gets
//! back from a call the router ran.

use rmcp::model::{CallToolResult, ContentBlock, ResultType};

use crate::tools::{Router, ToolOutcome};

/// The server's own result (every content block, `structuredContent`,
/// `isError`), with the values the server's env and header references
/// resolved to taken out, as they are from what a model reads. A result
/// over the server's output bound, or a call that never reached the
/// server (refused, waiting for approval, over quota), is the text a model
/// would have read.
pub fn client_result(router: &Router, outcome: &ToolOutcome) -> CallToolResult {
    if let Some(mut result) = upstream(router, outcome) {
        // Complete, whatever generation the server spoke (an older one
        // sends no `resultType`); rmcp takes it out again for a client
        // of an older generation.
        result.result_type = Some(ResultType::COMPLETE);
        return result;
    }
    let content = vec![ContentBlock::text(outcome.text.clone())];
    match outcome.is_error {
        true => CallToolResult::error(content),
        false => CallToolResult::success(content),
    }
}

/// The server's own result, redacted; `None` when there is none to give.
fn upstream(router: &Router, outcome: &ToolOutcome) -> Option<CallToolResult> {
    let (result, target) = outcome.upstream.as_deref().zip(outcome.executed.as_ref())?;
    let wire = serde_json::to_string(result).ok()?;
    let redacted = router.redact(&target.server, &wire);
    if redacted == wire {
        return Some(result.clone());
    }
    serde_json::from_str::<CallToolResult>(&redacted).ok()
}
