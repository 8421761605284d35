//! People sign in at SMS's OpenID issuer (`--oidc-issuer`): the
//! authorization code flow with PKCE and a nonce, for the public client
//! named by `--oidc-audience` (its ID tokens are the ones SMS takes). The
//! browser goes to the issuer from `/login/oidc` and comes back to
//! `/login/oidc/callback`, matched by the request's `state` once; SMS
//! trades the code for the person's ID token, verifies it (signature,
//! issuer, audience, nonce) and opens a session of role "person" that
//! lasts as long as the token. A person sees the tasks they may invoke and
//! invokes them as themselves; nothing else.

use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use maud::html;
use tracing::{info, warn};

use super::oauth::own_origin;
use super::Failure;
use crate::console::guard::{cookie, sign_in_binding, sign_in_cookie};
use crate::console::session::Person;
use crate::console::session::{constant_time_eq, random_id};
use crate::console::{page, Shared};

/// The issuer people sign in at, or why there is none.
fn issuer(state: &Shared) -> Result<&spear_identity::OidcVerifier, Failure> {
    state.oidc.as_deref().ok_or_else(|| {
        Failure::new(
            StatusCode::NOT_FOUND,
            "this SMS trusts no OpenID Connect issuer (--oidc-issuer); sign in with a token",
        )
    })
}

fn unreachable(error: impl std::fmt::Display) -> Failure {
    Failure::new(
        StatusCode::BAD_GATEWAY,
        format!("cannot sign in at the OpenID issuer: {error}"),
    )
}

/// `/login/oidc`: sends the browser to the issuer, with a cookie that
/// binds the sign-in to it. At most ten a minute from one address: each
/// holds a place among the pending ones.
pub async fn start(
    State(state): State<Shared>,
    ConnectInfo(peer): ConnectInfo<spear_identity::Peer>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    let oidc = issuer(&state)?;
    if let Some(ip) = peer.addr.map(|a| a.ip()) {
        if let Err(wait) = state.sign_in_starts.check(ip) {
            return Err(Failure::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "too many sign-ins started from this address; try again in {} s",
                    wait.as_secs().max(1)
                ),
            ));
        }
        state.sign_in_starts.failed(ip);
    }
    let endpoints = oidc.endpoints().await.map_err(unreachable)?;
    let redirect = format!("{}/login/oidc/callback", own_origin(&state, &headers)?);
    let sign_in =
        spear_oauth::begin_sign_in(&endpoints.authorization, oidc.audience(), &redirect, &[])
            .map_err(unreachable)?;
    let url = sign_in.url.clone();
    let binding = random_id();
    state
        .sign_ins_pending
        .insert(sign_in.state.clone(), (sign_in, binding.clone()));
    Ok((
        [(header::SET_COOKIE, sign_in_cookie(state.tls, &binding))],
        Redirect::to(&url),
    )
        .into_response())
}

/// `/login/oidc/callback`: the issuer sends the browser back here.
pub async fn callback(
    State(state): State<Shared>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, Failure> {
    let oidc = issuer(&state)?;
    let full = format!("{}{uri}", own_origin(&state, &headers)?);
    let unknown = || {
        Failure::new(
            StatusCode::BAD_REQUEST,
            "this sign-in is unknown, was used already or took longer than 10 minutes; sign in again",
        )
    };
    let state_param = spear_oauth::query_value(&full, "state").ok_or_else(unknown)?;
    let (sign_in, binding) = state
        .sign_ins_pending
        .take(&state_param)
        .ok_or_else(unknown)?;
    let held = sign_in_binding(&headers, state.tls).unwrap_or_default();
    if !constant_time_eq(held.as_bytes(), binding.as_bytes()) {
        warn!("console sign-in callback from a browser that did not start it");
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "this sign-in was started in another browser; sign in again from this one",
        ));
    }
    if let Some(error) = spear_oauth::query_value(&full, "error") {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            format!(
                "the issuer did not sign you in ({}); sign in again",
                error.escape_default()
            ),
        ));
    }
    let code = spear_oauth::query_value(&full, "code").ok_or_else(unknown)?;
    let endpoints = oidc.endpoints().await.map_err(unreachable)?;
    let nonce = sign_in.nonce().to_string();
    let token = sign_in
        .finish(&endpoints.token, &code)
        .await
        .map_err(unreachable)?;
    let (principal, expires) = oidc
        .verify_signed_in(&token, &nonce)
        .await
        .map_err(|refused| {
            warn!(%refused, "console sign-in through the issuer refused");
            Failure::new(
                StatusCode::FORBIDDEN,
                format!("the sign-in is refused: {refused}"),
            )
        })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let label = principal.label();
    let (id, _) = state
        .sessions
        .sign_in_person(Person { principal, token }, expires.saturating_sub(now));
    info!(principal = %label, "console sign-in through the issuer");
    // A page, not a redirect: the browser came here from another site, and
    // the session cookie is sent only on a navigation that starts here.
    let body = page::bare(
        "Signed in",
        html! {
            p id="signed-in" { "Signed in as " span class="mono" { (label) } "." }
            p { a id="continue" href="/tasks" { "Continue to your tasks" } }
        },
    );
    Ok((
        StatusCode::OK,
        // Both: `append`, not `insert`, or the second would replace the first.
        AppendHeaders([
            (header::SET_COOKIE, cookie(state.tls, &id)),
            (header::SET_COOKIE, sign_in_cookie(state.tls, "")),
        ]),
        body,
    )
        .into_response())
}
