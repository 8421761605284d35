//! The model provider of the tests: the one boundary we cannot reach here.
//!
//! Entry point: [`ScriptedModel::start`]. It serves both wire formats at
//! their real paths (`/v1/chat/completions` and `/chat/completions` for
//! OpenAI, `/v1/messages` for Anthropic) and answers each request with the
//! next [`Turn`] of its [`Source`]: a script played in order, or a
//! recording replayed by conversation position (`replay-llm`). Each turn is
//! rendered in the request's dialect, as one JSON body or, when the request
//! asks for `"stream": true`, as the provider's exact event stream
//! (`openai.rs`, `anthropic.rs`): final `finish_reason` chunk and usage
//! chunk, `ping` and `message_delta` events, `stop_reason` values, error
//! events mid-stream.
//!
//! Every request is validated as the provider would (`validate.rs`): an
//! assistant message's tool calls answered one by one before anything else,
//! ids matching, tools well formed. A request that breaks a rule gets the
//! provider's 400 and is kept in [`ScriptedModel::violations`], so a test
//! can also assert that none happened.
#![forbid(unsafe_code)]

mod anthropic;
mod openai;
mod replay;
mod validate;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use parking_lot::Mutex;
use serde_json::Value;

pub use replay::Recording;

/// Which provider's wire format a request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
}

/// One tool call the model makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    pub name: String,
    /// The arguments as the JSON text the model writes.
    pub arguments: String,
}

impl Call {
    pub fn new(id: &str, name: &str, arguments: Value) -> Call {
        Call {
            id: id.to_string(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        }
    }

    /// This call with its arguments cut after `at` bytes, as a token limit
    /// cuts them.
    fn cut(&self, at: usize) -> Call {
        Call {
            arguments: spear_common::text::prefix(&self.arguments, at).to_string(),
            ..self.clone()
        }
    }

    /// The arguments as a JSON value (Anthropic's `input`); `{}` when the
    /// text is not JSON.
    fn input(&self) -> Value {
        serde_json::from_str(&self.arguments).unwrap_or_else(|_| Value::Object(Default::default()))
    }
}

/// One answer of the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// A final answer (`finish_reason: stop`, `stop_reason: end_turn`).
    Answer(String),
    /// Tool calls, after an optional sentence (`tool_calls` / `tool_use`).
    ToolCalls { text: String, calls: Vec<Call> },
    /// The answer reached the output-token limit (`length` / `max_tokens`):
    /// the text so far and, if given, a tool call whose arguments are cut
    /// after `cut_at` bytes.
    Truncated {
        text: String,
        call: Option<(Call, usize)>,
    },
    /// An HTTP error in the provider's error shape.
    Error {
        status: u16,
        retry_after: Option<u32>,
        message: String,
    },
    /// A stream that starts answering `text`, then sends the provider's
    /// error event and ends. Without streaming: a 500.
    FailMidStream { text: String, message: String },
    /// Anthropic's server-side tool search (a request with a
    /// `tool_search_tool_*` tool and deferred tools): a `server_tool_use`
    /// searching for `query`, its `tool_search_tool_result` referencing
    /// those of `found` the request defers (a provider can only find the
    /// tools it was sent), then `calls`. Not in the OpenAI format.
    NativeSearch {
        query: String,
        found: Vec<String>,
        calls: Vec<Call>,
    },
}

impl Turn {
    pub fn answer(text: &str) -> Turn {
        Turn::Answer(text.to_string())
    }

    pub fn calls(calls: &[(&str, &str, Value)]) -> Turn {
        Turn::ToolCalls {
            text: String::new(),
            calls: calls
                .iter()
                .map(|(id, name, args)| Call::new(id, name, args.clone()))
                .collect(),
        }
    }

    pub fn native_search(query: &str, found: &[&str], calls: &[(&str, &str, Value)]) -> Turn {
        Turn::NativeSearch {
            query: query.to_string(),
            found: found.iter().map(|f| f.to_string()).collect(),
            calls: calls
                .iter()
                .map(|(id, name, args)| Call::new(id, name, args.clone()))
                .collect(),
        }
    }

    pub fn error(status: u16, retry_after: Option<u32>, message: &str) -> Turn {
        Turn::Error {
            status,
            retry_after,
            message: message.to_string(),
        }
    }
}

/// Token counts every successful answer reports: input per request, output
/// per answer. Known numbers, so a test can check how they are summed.
pub const PROMPT_TOKENS: u64 = 10;
pub const COMPLETION_TOKENS: u64 = 5;

/// Where turns come from.
pub enum Source {
    /// Played in order, one per request; a request past the end is a
    /// violation.
    Script(VecDeque<Turn>),
    /// Chosen by the number of assistant messages the request holds, so any
    /// number of conversations can run at once.
    Replay(Recording),
}

/// One request as the model received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub dialect: Dialect,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: Value,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

struct Shared {
    source: Mutex<Source>,
    requests: Mutex<Vec<Request>>,
    /// Where each request is also written as a JSON line (`replay-llm
    /// --log-requests`), for tests that run the model as a process.
    log: Mutex<Option<std::fs::File>>,
    violations: Mutex<Vec<String>>,
    delay: Duration,
}

/// A running model provider; serves until the runtime it started on ends.
#[derive(Clone)]
pub struct ScriptedModel {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl ScriptedModel {
    /// A script played in order, on an ephemeral loopback port. Panics when
    /// no loopback port can be bound (a fault of the test machine).
    pub async fn script(turns: Vec<Turn>) -> ScriptedModel {
        Self::start(
            Source::Script(turns.into()),
            SocketAddr::from(([127, 0, 0, 1], 0)),
            Duration::ZERO,
        )
        .await
        .expect("a loopback port")
    }

    /// Serves `source` on `listen`, answering each request after `delay`
    /// (as a model takes time to think).
    pub async fn start(
        source: Source,
        listen: SocketAddr,
        delay: Duration,
    ) -> std::io::Result<ScriptedModel> {
        let shared = Arc::new(Shared {
            source: Mutex::new(source),
            requests: Mutex::default(),
            log: Mutex::default(),
            violations: Mutex::default(),
            delay,
        });
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(openai_request))
            .route("/chat/completions", post(openai_request))
            .route("/v1/messages", post(anthropic_request))
            // Providers take long contexts (axum's default limit is 2 MB).
            .layer(axum::extract::DefaultBodyLimit::max(256 << 20))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(ScriptedModel { addr, shared })
    }

    /// The OpenAI base URL (`…/v1`).
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The Anthropic base URL.
    pub fn anthropic_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Also writes every request to `file`, one JSON line
    /// `{"dialect", "headers", "body"}` each.
    pub fn log_requests(&self, file: std::fs::File) {
        *self.shared.log.lock() = Some(file);
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().clone()
    }

    /// Every rule a request broke, one sentence each.
    pub fn violations(&self) -> Vec<String> {
        self.shared.violations.lock().clone()
    }
}

async fn openai_request(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    answer(&shared, Dialect::OpenAi, &headers, &body).await
}

async fn anthropic_request(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    answer(&shared, Dialect::Anthropic, &headers, &body).await
}

async fn answer(shared: &Shared, dialect: Dialect, headers: &HeaderMap, body: &[u8]) -> Response {
    tokio::time::sleep(shared.delay).await;
    let headers: BTreeMap<String, String> = headers
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_string(), value.to_str().ok()?.to_string()))
        })
        .collect();
    let body: Value = match serde_json::from_slice(body) {
        Ok(body) => body,
        Err(error) => return refuse(shared, dialect, format!("the body is not JSON: {error}")),
    };
    let request = Request {
        dialect,
        headers,
        body,
    };
    if let Some(file) = shared.log.lock().as_mut() {
        use std::io::Write;
        let dialect = match dialect {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
        };
        let line = serde_json::json!({"dialect": dialect, "headers": request.headers, "body": request.body});
        let _ = writeln!(file, "{line}");
    }
    shared.requests.lock().push(request.clone());
    if let Err(problem) = validate::request(&request) {
        return refuse(shared, dialect, problem);
    }
    let turn = match &mut *shared.source.lock() {
        Source::Script(turns) => turns.pop_front(),
        Source::Replay(recording) => Some(recording.turn_for(&request)),
    };
    let Some(turn) = turn else {
        return refuse(
            shared,
            dialect,
            "a request past the end of the script".to_string(),
        );
    };
    let stream = request.body["stream"] == true;
    match dialect {
        Dialect::OpenAi => openai::render(&turn, &request.body, stream),
        Dialect::Anthropic => anthropic::render(&turn, &request.body, stream),
    }
}

/// The provider's 400, kept as a violation and said on stderr (where the
/// end-to-end tests read `replay-llm`'s log).
fn refuse(shared: &Shared, dialect: Dialect, problem: String) -> Response {
    eprintln!("scripted model: refused a request: {problem}");
    shared.violations.lock().push(problem.clone());
    error_response(dialect, 400, None, &problem)
}

/// An HTTP error in `dialect`'s error shape.
fn error_response(
    dialect: Dialect,
    status: u16,
    retry_after: Option<u32>,
    message: &str,
) -> Response {
    let body = match dialect {
        Dialect::OpenAi => openai::error_body(status, message),
        Dialect::Anthropic => anthropic::error_body(status, message),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from(seconds));
    }
    response
}

/// A `text/event-stream` body from its events, each already framed.
fn event_stream(body: String) -> Response {
    ([("content-type", "text/event-stream")], body).into_response()
}

/// Splits `text` in two at a char boundary near its middle, so streamed
/// text always arrives in more than one delta.
fn halves(text: &str) -> [&str; 2] {
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid += 1;
    }
    [&text[..mid], &text[mid..]]
}
