//! How much of one server's tool list a node takes: at most `max_tools`
//! tools (its file's `limits.max_tools`, [`DEFAULT_MAX_TOOLS`] without
//! one) and [`BYTES_PER_TOOL`] bytes of list per tool allowed, its pages
//! together. A longer list is refused whole, with one sentence, and the
//! server is marked failed (`connections/listing.rs`).
//!
//! The bound is checked before the list is held: over stdio, a page is
//! weighed and its tools counted in the raw line, without building one of
//! them (`stdio_frames.rs`), and a page past the bound reaches the session
//! as an error in its place; on every transport the pages collected so far
//! are dropped as soon as their tools pass the bound
//! (`McpClient::list_tools`). A server listing 100,000 tools costs the node
//! the line it read, never the 100,000 tools.

use parking_lot::Mutex;
use rmcp::model::{ClientRequest, ErrorCode, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::RoleClient;
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use spear_proto::v1::ServerSpec;

/// Tools per server when its file sets no `limits.max_tools`.
pub const DEFAULT_MAX_TOOLS: usize = 2_000;
/// Bytes of listing read per tool allowed, every page together.
pub const BYTES_PER_TOOL: usize = 4 * 1024;
/// `tools/list` requests of one session answered at once, at most: more
/// are not weighed (only one listing runs at a time).
const MAX_PENDING: usize = 16;

/// One session's bound on its server's tool list, and the listing under
/// way: shared by what sends requests, what reads the server's lines and
/// what collects the pages.
#[derive(Debug)]
pub struct ListBound {
    server_id: String,
    max_tools: usize,
    max_bytes: usize,
    state: Mutex<Listing>,
}

#[derive(Debug, Default)]
struct Listing {
    /// `tools/list` requests sent and not yet answered.
    pending: Vec<RequestId>,
    tools: usize,
    bytes: usize,
    /// Why the last listing was refused, until the session reads it.
    refused: Option<String>,
}

impl ListBound {
    /// The bound `spec` sets.
    pub fn of(spec: &ServerSpec) -> Self {
        let declared = spec.limits.map_or(0, |l| l.max_tools as usize);
        let max_tools = if declared == 0 {
            DEFAULT_MAX_TOOLS
        } else {
            declared
        };
        ListBound {
            server_id: spec.id.clone(),
            max_tools,
            max_bytes: max_tools.saturating_mul(BYTES_PER_TOOL),
            state: Mutex::new(Listing::default()),
        }
    }

    #[cfg(test)]
    fn max_tools(&self) -> usize {
        self.max_tools
    }

    /// Notes a `tools/list` request on its way: a first page starts a new
    /// listing.
    pub fn sent(&self, message: &TxJsonRpcMessage<RoleClient>) {
        let JsonRpcMessage::Request(request) = message else {
            return;
        };
        let ClientRequest::ListToolsRequest(list) = &request.request else {
            return;
        };
        let mut state = self.state.lock();
        let first = list.params.as_ref().is_none_or(|p| p.cursor.is_none());
        if first {
            (state.tools, state.bytes) = (0, 0);
        }
        if state.pending.len() >= MAX_PENDING {
            state.pending.remove(0);
        }
        state.pending.push(request.id.clone());
    }

    /// `line` as the session receives it: an answer to a `tools/list` that
    /// would pass the bound becomes an error answer, before it is parsed
    /// into tools.
    pub fn weigh(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        let mut state = self.state.lock();
        if state.pending.is_empty() {
            return None;
        }
        let id = serde_json::from_slice::<Envelope>(line).ok()?.id?;
        let at = state.pending.iter().position(|p| *p == id)?;
        state.pending.remove(at);
        state.bytes = state.bytes.saturating_add(line.len());
        // Counted without building a tool; an answer that is not a list
        // (an error) is the session's to report.
        if state.bytes <= self.max_bytes {
            let counted = serde_json::from_slice::<Answer>(line).map_or(0, |a| a.result.tools.0);
            state.tools = state.tools.saturating_add(counted);
        }
        if state.tools <= self.max_tools && state.bytes <= self.max_bytes {
            return None;
        }
        let sentence = self.sentence();
        state.refused = Some(sentence.clone());
        Some(JsonRpcMessage::error(
            ErrorData::new(ErrorCode::INTERNAL_ERROR, sentence, None),
            Some(id),
        ))
    }

    /// Refuses the listing under way if `tools` so far pass the bound.
    pub fn check(&self, tools: usize) -> Result<(), String> {
        if tools <= self.max_tools {
            return Ok(());
        }
        let sentence = self.sentence();
        self.state.lock().refused = Some(sentence.clone());
        Err(sentence)
    }

    /// Why the listing was refused, if it was (once).
    pub fn take_refusal(&self) -> Option<String> {
        self.state.lock().refused.take()
    }

    fn sentence(&self) -> String {
        format!(
            "server '{}' lists more than {} tools (or {} KiB of them); its list was refused and none of its tools are offered: raise \"limits.max_tools\" in its server file if it really has that many",
            self.server_id,
            self.max_tools,
            self.max_bytes / 1024
        )
    }
}

/// The id of any JSON-RPC message, with nothing else built.
#[derive(Deserialize)]
struct Envelope {
    id: Option<RequestId>,
}

/// A `tools/list` answer with its tools counted, not built.
#[derive(Deserialize)]
struct Answer {
    result: Page,
}

#[derive(Deserialize)]
struct Page {
    tools: Counted,
}

/// A JSON array's length, its elements skipped, not built.
struct Counted(usize);

impl<'de> Deserialize<'de> for Counted {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(Counting).map(Counted)
    }
}

struct Counting;

impl<'de> Visitor<'de> for Counting {
    type Value = usize;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of tools")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut n = 0usize;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bound(max_tools: u32) -> ListBound {
        let spec = ServerSpec {
            id: "s".into(),
            limits: Some(spear_proto::v1::Limits {
                max_tools,
                ..Default::default()
            }),
            ..Default::default()
        };
        ListBound::of(&spec)
    }

    fn list(bound: &ListBound, id: u64, cursor: Option<&str>) {
        let params = cursor.map_or(json!({}), |c| json!({"cursor": c}));
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
        let message: TxJsonRpcMessage<RoleClient> =
            serde_json::from_value(request).unwrap_or_else(|e| panic!("{e}"));
        bound.sent(&message);
    }

    fn page(id: u64, tools: usize, description: &str) -> Vec<u8> {
        let tools: Vec<_> = (0..tools)
            .map(|i| {
                json!({"name": format!("t{i}"), "description": description,
                            "inputSchema": {"type": "object"}})
            })
            .collect();
        json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn a_page_past_the_bound_is_refused_before_it_is_parsed() {
        let b = bound(0);
        assert_eq!(b.max_tools(), DEFAULT_MAX_TOOLS);
        list(&b, 1, None);
        assert!(b.weigh(&page(1, DEFAULT_MAX_TOOLS, "")).is_none());
        list(&b, 2, None);
        let refused = b.weigh(&page(2, DEFAULT_MAX_TOOLS + 1, ""));
        assert!(
            matches!(refused, Some(JsonRpcMessage::Error(_))),
            "{refused:?}"
        );
        let why = b.take_refusal().unwrap_or_default();
        assert!(why.contains("lists more than 2000 tools"), "{why}");
        assert!(b.take_refusal().is_none(), "said once");
    }

    #[test]
    fn pages_count_together_and_a_new_listing_starts_again() {
        let b = bound(10);
        list(&b, 1, None);
        assert!(b.weigh(&page(1, 6, "")).is_none());
        list(&b, 2, Some("next"));
        assert!(
            b.weigh(&page(2, 6, "")).is_some(),
            "12 tools over two pages"
        );
        list(&b, 3, None);
        assert!(b.weigh(&page(3, 6, "")).is_none(), "a new listing");
    }

    #[test]
    fn bytes_are_bounded_as_well_as_tools() {
        let b = bound(1);
        list(&b, 1, None);
        let long = "x".repeat(BYTES_PER_TOOL + 1);
        assert!(b.weigh(&page(1, 1, &long)).is_some());
    }

    #[test]
    fn other_lines_pass_untouched() {
        let b = bound(1);
        assert!(b.weigh(&page(7, 5, "")).is_none(), "no listing under way");
        list(&b, 1, None);
        assert!(
            b.weigh(&page(7, 5, "")).is_none(),
            "not the listing's answer"
        );
        let call = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}});
        assert!(b.weigh(call.to_string().as_bytes()).is_none());
        assert!(b.check(1).is_ok() && b.check(2).is_err());
    }
}
