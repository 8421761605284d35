//! One file per console section. Each handler reads SMS through
//! [`super::Api`], renders with maud (every value escaped) and, for a
//! write, checks the session's role and CSRF token first.

pub mod audit;
pub mod audit_disputes;
pub mod connections;
pub mod explain;
pub mod nodes;
pub mod oauth;
pub mod people;
pub mod registry;
pub mod signin;
pub mod tasks;
pub mod trust;
pub mod usage;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};

use super::page;
use super::session::WriteRefused;

/// A form that carries nothing but its CSRF token (sign-out, delete,
/// verify, a login's start).
#[derive(serde::Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// A page that could not be shown, as one sentence.
pub struct Failure {
    status: StatusCode,
    message: String,
}

impl Failure {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl From<tonic::Status> for Failure {
    fn from(status: tonic::Status) -> Self {
        let code = match status.code() {
            tonic::Code::NotFound => StatusCode::NOT_FOUND,
            tonic::Code::InvalidArgument | tonic::Code::FailedPrecondition => {
                StatusCode::BAD_REQUEST
            }
            tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_GATEWAY,
        };
        Self::new(code, status.message().to_string())
    }
}

impl From<WriteRefused> for Failure {
    fn from(refused: WriteRefused) -> Self {
        Self::new(StatusCode::FORBIDDEN, refused.to_string())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = page::bare(
            "Not done",
            html! {
                (page::notice("error", &self.message))
                p { a href="/" { "Back to the console" } }
            },
        );
        (self.status, body).into_response()
    }
}

/// What a view returns.
pub type View = Result<Markup, Failure>;

/// A state name as a badge: ok, warn or bad by what it means.
pub fn badge(text: &str) -> Markup {
    let class = match text {
        "ready" | "alive" | "current" | "valid" | "approved" | "used" | "run" | "ok" | "pinned"
        | "synced" | "whole" | "enabled" | "on demand" => "ok",
        "failed" | "not alive" | "denied" | "expired" | "needs login" | "unreadable" | "broken"
        | "drifted" | "rejected" | "refused" | "approval_denied" => "bad",
        _ => "warn",
    };
    html! { span class={"state " (class)} { (text) } }
}

/// `notice` codes a write redirects with, as their sentences.
pub fn notice_of(code: &str) -> Option<Markup> {
    let text = match code {
        "approved" => "Approved: the call goes on.",
        "denied" => "Denied: the model gets the reason as the tool's result.",
        "pins-approved" => "Pins approved: nodes offer the tools as they are now.",
        "registered" => "Task registered.",
        "deleted" => "Task deleted.",
        _ => return None,
    };
    Some(page::notice("ok", text))
}
