//! OAuth: which servers need a login, and each credential's state (never
//! a value). What `sms oauth status` shows. A login runs the
//! authorization-code flow from `sms oauth login`, whose redirect comes
//! back to the operator's own machine; the page gives the command.

use axum::extract::State;
use axum::Extension;
use maud::html;
use spear_proto::v1::CredentialState;

use super::{badge, View};
use crate::console::guard::Signed;
use crate::console::page;
use crate::console::Shared;

pub async fn page(State(state): State<Shared>, Extension(signed): Extension<Signed>) -> View {
    let credentials = state.api.credentials().await?;
    let body = html! {
        @if credentials.is_empty() {
            p class="muted" { "No server in the registry declares \"auth\"." }
        } @else {
            table id="oauth-table" {
                thead { tr { th { "Server" } th { "State" } th { "Scopes" } th { "Logged in (UTC)" } th { "By" } th { "Expires (UTC)" } th { "Renewable" } th { "Problem" } th { "Log in" } } }
                tbody {
                    @for c in &credentials {
                        tr data-server=(c.server_id) {
                            td class="mono" { (c.server_id) }
                            td { (badge(CredentialState::label_of(c.state))) }
                            td class="mono" { (c.scopes.join(" ")) }
                            td { (page::time(c.logged_in_at_ms)) }
                            td { (c.logged_in_by) }
                            td { (page::time(c.expires_at_ms)) }
                            td { (c.has_refresh_token) }
                            td { (c.problem) }
                            td class="mono" { "sms oauth login " (c.server_id) }
                        }
                    }
                }
            }
            p class="muted" { "A login runs on the operator's machine: the authorization server sends the browser back to the loopback address `sms oauth login` listens on, then SMS seals the tokens and renews them." }
        }
    };
    Ok(page::page(
        "OAuth",
        "/oauth",
        "/oauth",
        &signed.session,
        body,
    ))
}
