//! A person's accounts: the servers whose people log in themselves
//! (`"per_principal": true`), whether this person has connected theirs,
//! and **Connect**, which runs the authorization-code flow as the OAuth
//! page does for an admin, except that what it obtains is kept as this
//! person's own credential, handed only to their runs.

use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Form;
use maud::html;
use spear_proto::v1::CredentialState;
use tracing::info;

use crate::console::guard::{Signed, Visit};
use crate::console::page::{self, enc};
use crate::console::views::{badge, CsrfForm, Failure, View};

/// The person this session is for, or why a page is not theirs.
fn person(signed: &Signed) -> Result<String, Failure> {
    signed
        .session
        .person
        .as_ref()
        .map(|p| p.principal.label())
        .ok_or_else(|| {
            Failure::new(
                StatusCode::FORBIDDEN,
                "accounts are connected by the people who signed in at the issuer, each their own; an admin logs the cluster in on the OAuth page",
            )
        })
}

pub async fn page(Visit { state, signed }: Visit) -> View {
    let principal = person(&signed)?;
    let accounts = state
        .api
        .broker
        .person_statuses(&principal)
        .await
        .map_err(|e| Failure::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    let body = html! {
        @if accounts.is_empty() {
            p class="muted" { "No server asks people to connect their own account." }
        } @else {
            table id="accounts-table" {
                thead { tr { th { "Server" } th { "State" } th { "Scopes" } th { "Connected (UTC)" } th { "Problem" } th { "" } } }
                tbody {
                    @for a in &accounts {
                        tr data-server=(a.server_id) data-state=(CredentialState::label_of(a.state)) {
                            td class="mono" { (a.server_id) }
                            td { (badge(CredentialState::label_of(a.state))) }
                            td class="mono" { (a.scopes.join(" ")) }
                            td { (page::time(a.logged_in_at_ms)) }
                            td { (a.problem) }
                            td {
                                (page::post_button(&signed.session, &format!("/accounts/{}/connect", enc(&a.server_id)), "Connect", "connect"))
                            }
                        }
                    }
                }
            }
            p class="muted" { "Connect sends this browser to the server's authorization server, where you sign in as yourself; SMS keeps the tokens sealed, renews them, and gives them only to your runs." }
        }
    };
    let shown = page::section_page("Accounts", "/accounts", &signed.session, body);
    Ok(shown)
}

pub async fn connect(
    Visit { state, signed }: Visit,
    Path(server): Path<String>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, Failure> {
    let principal = person(&signed)?;
    signed.session.may_invoke(&form.csrf)?;
    let authorize = super::oauth::begin(&state, &headers, &server, Some(principal.clone())).await?;
    info!(server_id = %server, %principal, "a person started connecting their account");
    let lead = html! { "Connecting your account for " span class="mono" { (server) } "." };
    Ok(super::oauth::onward(
        &signed,
        ("Connect", "/accounts"),
        lead,
        &authorize,
    ))
}
