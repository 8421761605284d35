//! Sign-in and sign-out: the token (admin or viewer) is exchanged for a
//! session cookie; sign-out ends the session on SMS, not only in the
//! browser.

use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use serde::Deserialize;
use tracing::info;

use crate::console::guard::{cookie, same_site, session_id, Visit};
use crate::console::views::CsrfForm;
use crate::console::{page, Shared};

#[derive(Deserialize)]
pub struct SignIn {
    #[serde(default)]
    token: String,
}

fn form_page(error: Option<&str>, issuer: Option<&str>) -> maud::Markup {
    page::bare(
        "Sign in",
        html! {
            @if let Some(error) = error { (page::notice("error", error)) }
            @if let Some(issuer) = issuer {
                p { a id="sign-in-issuer" class="button primary" href="/login/oidc" { "Sign in at " (issuer) } }
                p class="muted" { "To run the tasks meant for you. Operators sign in with a token:" }
            }
            form method="post" action="/login" class="stack" {
                label for="token" { "Admin or viewer token" }
                input id="token" type="password" name="token" autocomplete="current-password" required;
                p class="muted" { "The contents of SMS's --admin-token-file (or --viewer-token-file for a read-only view)." }
                button type="submit" class="primary" { "Sign in" }
            }
        },
    )
}

/// The issuer people sign in at, when SMS trusts one.
fn issuer_of(state: &Shared) -> Option<&str> {
    state
        .oidc
        .as_deref()
        .map(spear_identity::OidcVerifier::issuer)
}

pub async fn form(State(state): State<Shared>, headers: HeaderMap) -> Response {
    if session_id(&headers, state.tls).is_some_and(|id| state.sessions.get(&id).is_some()) {
        return Redirect::to("/").into_response();
    }
    form_page(None, issuer_of(&state)).into_response()
}

/// The answer to a wrong token from an address past its allowance.
fn too_many(wait: std::time::Duration) -> Response {
    let seconds = wait.as_secs().max(1);
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, seconds.to_string())],
        format!("too many wrong sign-ins from this address; try again in {seconds} s\n"),
    )
        .into_response()
}

pub async fn sign_in(
    State(state): State<Shared>,
    ConnectInfo(peer): ConnectInfo<spear_identity::Peer>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    if let Err(refused) = same_site(&headers) {
        return refused;
    }
    let source = peer.addr.map(|a| a.ip());
    match state.sessions.sign_in(form.token.trim()) {
        Some((id, session)) => {
            info!(role = session.role.name(), "console sign-in");
            (
                StatusCode::SEE_OTHER,
                [
                    (header::SET_COOKIE, cookie(state.tls, &id)),
                    (header::LOCATION, "/".to_string()),
                ],
            )
                .into_response()
        }
        None => {
            if let Some(ip) = source {
                if let Err(wait) = state.sign_ins.check(ip) {
                    return too_many(wait);
                }
                state.sign_ins.failed(ip);
            }
            info!("console sign-in refused: wrong token");
            (
                StatusCode::UNAUTHORIZED,
                form_page(
                    Some(
                        "That token is neither SMS's admin token nor its viewer token; copy it from the token file and try again.",
                    ),
                    issuer_of(&state),
                ),
            )
                .into_response()
        }
    }
}

pub async fn sign_out(Visit { state, signed }: Visit, Form(form): Form<CsrfForm>) -> Response {
    if let Err(refused) = signed.session.sent_by_us(&form.csrf) {
        return (StatusCode::FORBIDDEN, format!("{refused}\n")).into_response();
    }
    state.sessions.sign_out(&signed.id);
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cookie(state.tls, "")),
            (header::LOCATION, "/login".to_string()),
        ],
    )
        .into_response()
}
