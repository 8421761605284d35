//! OAuth 2.1 for remote MCP servers, per the MCP authorization spec, on
//! rmcp's authorization manager (discovery, PKCE, registration, token
//! exchange and refresh are the library's; which client we are, how the
//! operator's browser reaches us, and when to ask again are ours).
//!
//! Entry point: [`Authorizer`], made from a server file's `auth`
//! ([`ClientConfig`]), a [`Redirect`] and a [`Browser`]:
//! - [`Authorizer::authorize`] answers a server's 401 challenge with the
//!   authorization-code flow (PKCE S256, the resource indicator, the
//!   client identified in the spec's order: pre-registered, Client ID
//!   Metadata Document, dynamic registration) or, for machine-to-machine
//!   servers, client credentials, or an enterprise's identity provider
//!   ([`enterprise_managed`], SEP-990), or the workload's own JWT
//!   ([`jwt_bearer`], SEP-1933);
//! - [`token_exchange`] (RFC 8693) and [`workload_token`] are SMS's, for
//!   servers that act per principal: a person's token with the node as
//!   actor, or the node's own workload JWT;
//! - [`Authorizer::step_up`] answers a 403 `insufficient_scope` by asking
//!   again for the scopes held plus those the server names, a bounded
//!   number of times;
//! - [`begin_login`] and [`PendingLogin::finish`] are the same flow for a
//!   caller that serves the redirect itself (SMS's console);
//! - [`held`] takes what a login obtained, to keep; [`refresh`] renews it
//!   (SMS does this for a cluster).
//!
//! Secrets (client secrets, keys, codes, verifiers, tokens) are held in
//! [`Secret`]s or inside rmcp's types and never formatted into an error.
#![forbid(unsafe_code)]

mod authorize;
mod browser;
mod client;
pub mod dpop;
mod enterprise;
mod error;
mod grant_request;
mod jwt_bearer;
mod network;
mod redirect;
mod sign_in;
mod terminal;
mod token_exchange;
mod tokens;
mod web_login;

pub use authorize::{client_credentials, Authorizer, MAX_STEP_UPS};
pub use browser::Browser;
pub use client::{check_spec, ClientConfig, Grant, IdpConfig, Secret, Unresolved};
pub use enterprise::enterprise_managed;
pub use error::{describe, OAuthError};
pub use grant_request::Granted;
pub use jwt_bearer::{jwt_bearer, workload_token};
pub use network::Network;
pub use redirect::Redirect;
pub use sign_in::{begin_sign_in, SignIn};
pub use terminal::LoginFlags;
pub use token_exchange::{subject_token_type, token_exchange, Subject, SUBJECT_TOKEN_TYPES};
pub use tokens::{
    access_token, dpop_bound, due_at, expires_at, has_refresh_token, held, refresh, renew_at,
    token_digest,
};
pub use web_login::{begin_login, query_value, PendingLogin};

/// rmcp's types a caller holds: the manager an authorization yields (it
/// refreshes its own tokens) and the challenge parser.
pub use rmcp::transport::auth::{AuthError, StoredCredentials, WWWAuthenticateParams};
pub use rmcp::transport::AuthorizationManager;
