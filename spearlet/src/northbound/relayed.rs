//! What a virtual server relays besides tools: its servers' prompts and
//! resources, and completions of their arguments. Prompts are named as
//! tools are (`server__prompt`, or the offer's alias: names never depend
//! on how many servers there are); resources keep their URIs, and a read
//! goes to the server that lists the URI, or else to the first whose
//! template matches it. Every answer is redacted of the server's secrets
//! before it leaves the node, as a tool's result is.

use rmcp::model::{
    ClientRequest, ErrorData as RpcError, PaginatedRequestParams, Prompt, Resource,
    ResourceTemplate, ServerResult,
};
use serde::{de::DeserializeOwned, Serialize};
use spear_proto::exposed::Names;
use tracing::debug;

use super::listing::VirtualTools;
use crate::mcp::McpError;
use crate::tools::Router;

/// At most this many pages of one list are taken from one server.
const MAX_PAGES: usize = 16;

/// The prompts a virtual server offers now, and what each name stands for.
#[derive(Default)]
pub struct Prompts {
    pub prompts: Vec<Prompt>,
    names: Names,
}

impl Prompts {
    /// The server and upstream prompt `name` stands for.
    pub fn resolve(&self, name: &str) -> Option<(String, String)> {
        self.names
            .resolve(name)
            .map(|(server, prompt)| (server.to_string(), prompt.to_string()))
    }
}

impl VirtualTools {
    /// Every prompt of the virtual server's usable servers, named.
    pub async fn prompts(&self, router: &Router) -> Prompts {
        let mut found = Prompts::default();
        for server in self.servers(router).await {
            let alias = |name: &str| self.alias(&server, name);
            let prompts: Vec<Prompt> = pages(router, &server, list_prompts).await;
            for mut prompt in prompts {
                match found.names.add(&server, &prompt.name, alias(&prompt.name)) {
                    Ok(exposed) => {
                        prompt.name = exposed;
                        found.prompts.push(prompt);
                    }
                    Err(refused) => debug!(virtual_server = %self.spec().name, "{refused}"),
                }
            }
        }
        found
    }

    /// Every resource of the usable servers; a URI two servers list is
    /// the earlier's.
    pub async fn resources(&self, router: &Router) -> Vec<(String, Resource)> {
        let mut found: Vec<(String, Resource)> = Vec::new();
        for server in self.servers(router).await {
            for resource in pages::<Resource>(router, &server, list_resources).await {
                if !found.iter().any(|(_, r)| r.uri == resource.uri) {
                    found.push((server.clone(), resource));
                }
            }
        }
        found
    }

    /// Every resource template of the usable servers, with its server.
    pub async fn templates(&self, router: &Router) -> Vec<(String, ResourceTemplate)> {
        let mut found = Vec::new();
        for server in self.servers(router).await {
            for template in pages::<ResourceTemplate>(router, &server, list_templates).await {
                found.push((server.clone(), template));
            }
        }
        found
    }

    /// The server a read of `uri` goes to: the one listing it, else the
    /// first with a template it matches.
    pub async fn resource_server(&self, router: &Router, uri: &str) -> Option<String> {
        let listed = self.resources(router).await;
        if let Some((server, _)) = listed.into_iter().find(|(_, r)| r.uri == uri) {
            return Some(server);
        }
        let templates = self.templates(router).await;
        templates
            .into_iter()
            .find(|(_, t)| t.uri_template == uri || super::template::matches(&t.uri_template, uri))
            .map(|(server, _)| server)
    }
}

fn list_prompts(params: Option<PaginatedRequestParams>) -> ClientRequest {
    ClientRequest::ListPromptsRequest(rmcp::model::ListPromptsRequest {
        params,
        ..Default::default()
    })
}

fn list_resources(params: Option<PaginatedRequestParams>) -> ClientRequest {
    ClientRequest::ListResourcesRequest(rmcp::model::ListResourcesRequest {
        params,
        ..Default::default()
    })
}

fn list_templates(params: Option<PaginatedRequestParams>) -> ClientRequest {
    ClientRequest::ListResourceTemplatesRequest(rmcp::model::ListResourceTemplatesRequest {
        params,
        ..Default::default()
    })
}

/// One kind of list, every page of it, from `server`. A server that does
/// not serve the kind (or fails) contributes nothing.
async fn pages<T: Page>(
    router: &Router,
    server: &str,
    request: fn(Option<PaginatedRequestParams>) -> ClientRequest,
) -> Vec<T> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let answer = match router.relay(server, request(params)).await {
            Ok(answer) => answer,
            Err(error) => {
                debug!(server_id = %server, %error, "not listed from this server");
                break;
            }
        };
        let Some((page, next)) = T::page(answer) else {
            break;
        };
        items.extend(
            page.into_iter()
                .filter_map(|item| redacted(router, server, item)),
        );
        match next {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => break,
        }
    }
    items
}

/// An item of a paginated list, taken out of the server's answer.
trait Page: Sized + Serialize + DeserializeOwned {
    fn page(answer: ServerResult) -> Option<(Vec<Self>, Option<String>)>;
}

impl Page for Prompt {
    fn page(answer: ServerResult) -> Option<(Vec<Self>, Option<String>)> {
        match answer {
            ServerResult::ListPromptsResult(r) => Some((r.prompts, r.next_cursor)),
            _ => None,
        }
    }
}

impl Page for Resource {
    fn page(answer: ServerResult) -> Option<(Vec<Self>, Option<String>)> {
        match answer {
            ServerResult::ListResourcesResult(r) => Some((r.resources, r.next_cursor)),
            _ => None,
        }
    }
}

impl Page for ResourceTemplate {
    fn page(answer: ServerResult) -> Option<(Vec<Self>, Option<String>)> {
        match answer {
            ServerResult::ListResourceTemplatesResult(r) => {
                Some((r.resource_templates, r.next_cursor))
            }
            _ => None,
        }
    }
}

/// `value` with the values `server`'s references resolved to taken out;
/// `None` if taking them out left it unreadable (it is then withheld).
pub fn redacted<T: Serialize + DeserializeOwned>(
    router: &Router,
    server: &str,
    value: T,
) -> Option<T> {
    let wire = serde_json::to_string(&value).ok()?;
    let clean = router.redact(server, &wire);
    if clean == wire {
        return Some(value);
    }
    serde_json::from_str(&clean).ok()
}

/// What a northbound client is told when a relayed request fails: the
/// server's own JSON-RPC error as it was, or the node's sentence.
pub fn client_error(error: McpError) -> RpcError {
    match error {
        McpError::Rpc(error) => error,
        other => RpcError::internal_error(other.to_string(), None),
    }
}
