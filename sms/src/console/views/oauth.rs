//! OAuth: which servers need a login, and each credential's state (never
//! a value), as `sms oauth status` shows them; and a login started from
//! the page. SMS runs the authorization-code flow (PKCE, the resource
//! indicator, registration, as `sms oauth login` does), the browser goes
//! to the authorization server and comes back to `/oauth/callback`, and
//! SMS seals what it obtained as a `PutCredential` by `admin/console`.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Form;
use maud::{html, Markup};
use spear_proto::v1::{CredentialState, OauthGrant};
use tracing::{info, warn};

use crate::console::guard::{Signed, Visit};
use crate::console::page::{self, enc};
use crate::console::views::{badge, CsrfForm, Failure, View};
use crate::console::Shared;

pub async fn page(Visit { state, signed }: Visit) -> View {
    let credentials = state.api.credentials().await?;
    let body = html! {
        @if credentials.is_empty() {
            p class="muted" { "No server in the registry declares \"auth\"." }
        } @else {
            table id="oauth-table" {
                thead { tr { th { "Server" } th { "State" } th { "Grant" } th { "Scopes" } th { "Logged in (UTC)" } th { "By" } th { "Expires (UTC)" } th { "Renewable" } th { "Problem" } th { "" } } }
                tbody {
                    @for c in &credentials {
                        tr data-server=(c.server_id) data-state=(CredentialState::label_of(c.state)) {
                            td class="mono" { (c.server_id) }
                            td { (badge(CredentialState::label_of(c.state))) }
                            td { (OauthGrant::label_of(c.grant)) }
                            td class="mono" { (c.scopes.join(" ")) }
                            td { (page::time(c.logged_in_at_ms)) }
                            td { (c.logged_in_by) }
                            td { (page::time(c.expires_at_ms)) }
                            td { (c.has_refresh_token) }
                            td { (c.problem) }
                            td {
                                @if c.grant == OauthGrant::AuthorizationCode as i32 && signed.session.is_admin() {
                                    (page::post_button(&signed.session, &format!("/oauth/{}/login", enc(&c.server_id)), "Log in", "login"))
                                }
                            }
                        }
                    }
                }
            }
            p class="muted" { "Log in sends this browser to the server's authorization server; it comes back here and SMS seals the tokens and renews them. `sms oauth login SERVER` does the same from a terminal." }
        }
    };
    Ok(page::section_page("OAuth", "/oauth", &signed.session, body))
}

/// This console's own address, as the browser reached it.
pub(super) fn own_origin(state: &Shared, headers: &HeaderMap) -> Result<String, Failure> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| Failure::new(StatusCode::BAD_REQUEST, "the request names no Host"))?;
    let scheme = if state.tls { "https" } else { "http" };
    Ok(format!("{scheme}://{host}"))
}

pub async fn start(
    Visit { state, signed }: Visit,
    Path(server): Path<String>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Failure> {
    signed.session.may_write(&form.csrf)?;
    let authorize = begin(&state, &headers, &server, None).await?;
    info!(server_id = %server, "console login started");
    let issuer = authorize.split('?').next().unwrap_or_default().to_string();
    let lead = html! {
        "Signing in to " span class="mono" { (server) } " at its authorization server, "
        span class="mono" { (issuer) } "."
    };
    Ok(onward(&signed, ("Log in", "/oauth"), lead, &authorize))
}

/// The page that sends the browser on to `authorize`: not a redirect,
/// since the CSP's `form-action 'self'` rightly stops a form from landing
/// on another origin; a link does not, and the script follows it at once.
pub(super) fn onward(
    signed: &Signed,
    (title, section): (&str, &str),
    lead: Markup,
    authorize: &str,
) -> Response {
    let body = html! {
        p { (lead) }
        p { a id="authorize" href=(authorize) data-follow { "Continue to the authorization server" } }
    };
    page::page(title, section, section, &signed.session, body).into_response()
}

/// Starts the authorization-code flow to `server`, coming back to
/// `/oauth/callback`, for `person`'s own account or (`None`) the cluster's:
/// the authorization URL the browser goes to.
pub(super) async fn begin(
    state: &Shared,
    headers: &HeaderMap,
    server: &str,
    person: Option<String>,
) -> Result<String, Failure> {
    let (url, client) = state
        .api
        .broker
        .login_client(server)
        .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let redirect = format!("{}/oauth/callback", own_origin(state, headers)?);
    let (pending, authorize) =
        spear_oauth::begin_login(&url, &client, &redirect, None, &client.scopes)
            .await
            .map_err(|e| {
                Failure::new(
                    StatusCode::BAD_GATEWAY,
                    format!("cannot start a login to server '{server}': {e}"),
                )
            })?;
    state.logins.insert(
        pending.state_param.clone(),
        (server.to_string(), person, pending),
    );
    Ok(authorize)
}

/// Where the authorization server sends the browser back.
pub async fn callback(
    State(state): State<Shared>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, Failure> {
    let full = format!("{}{uri}", own_origin(&state, &headers)?);
    let unknown = || {
        Failure::new(
            StatusCode::BAD_REQUEST,
            "this login is unknown, was used already or took longer than 10 minutes; start it again from the OAuth page",
        )
    };
    let state_param = spear_oauth::query_value(&full, "state").ok_or_else(unknown)?;
    let (server, person, pending) = state.logins.take(&state_param).ok_or_else(unknown)?;
    let failed = |why: String| {
        warn!(server_id = %server, %why, "console login failed");
        Failure::new(
            StatusCode::BAD_GATEWAY,
            format!("the login to server '{server}' failed: {why}"),
        )
    };
    let manager = pending
        .finish(&full)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let held = spear_oauth::held(&manager)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let json = serde_json::to_string(&held).map_err(|e| failed(e.to_string()))?;
    let status = match &person {
        // A person's own account: theirs alone.
        Some(principal) => state
            .api
            .broker
            .put_for_person(&server, principal, &json)
            .await
            .map_err(|e| failed(e.to_string()))?,
        None => state.api.put_credential(&server, json).await?,
    };
    info!(server_id = %server, person = ?person, "console login completed");
    let body = page::bare(
        "Logged in",
        html! {
            p id="logged-in" { "Logged in to " span class="mono" { (server) } ": "
                (CredentialState::label_of(status.state)) ", scopes " (status.scopes.join(" ")) "." }
            p { "SMS holds the tokens sealed and renews them. " a href="/oauth" { "Back to OAuth" } }
        },
    );
    Ok(body.into_response())
}
