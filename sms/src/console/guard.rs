//! What every console response passes through: the security headers
//! ([`headers`]) and, for all but sign-in and the assets, the session
//! check ([`signed_in`]), which also refuses any write that a browser
//! says comes from another site before its body is read.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use super::session::Session;
use super::Shared;

/// Scripts, styles and everything else only from SMS itself; no inline
/// script or style, no framing, forms post only here.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

/// The session cookie's name: `__Host-` under TLS, which browsers only
/// accept when Secure, for this host and path `/`.
pub fn cookie_name(tls: bool) -> &'static str {
    if tls {
        "__Host-spear_console"
    } else {
        "spear_console"
    }
}

/// The `set-cookie` value for session `id` (or, empty, one that ends it).
pub fn cookie(tls: bool, id: &str) -> String {
    let max_age = if id.is_empty() {
        0
    } else {
        super::SESSION_TTL.as_secs()
    };
    let secure = if tls { "; Secure" } else { "" };
    format!(
        "{}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}",
        cookie_name(tls)
    )
}

/// The cookie that binds a sign-in at the issuer to the browser that
/// started it: `SameSite=Lax`, since the issuer sends the browser back by a
/// cross-site navigation, and gone once used.
pub fn sign_in_cookie(tls: bool, binding: &str) -> String {
    let (name, secure) = if tls {
        ("__Host-spear_sign_in", "; Secure")
    } else {
        ("spear_sign_in", "")
    };
    let max_age = if binding.is_empty() {
        0
    } else {
        super::logins::PENDING_FOR.as_secs()
    };
    format!("{name}={binding}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}")
}

/// The sign-in binding the request's cookie carries.
pub fn sign_in_binding(headers: &HeaderMap, tls: bool) -> Option<String> {
    let name = if tls {
        "__Host-spear_sign_in"
    } else {
        "spear_sign_in"
    };
    cookie_value(headers, name)
}

/// The session id the request's cookie names.
pub fn session_id(headers: &HeaderMap, tls: bool) -> Option<String> {
    cookie_value(headers, cookie_name(tls))
}

fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// The signed-in session, and its id (for sign-out).
#[derive(Clone)]
pub struct Signed {
    pub id: String,
    pub session: Session,
}

/// What a page handler behind [`signed_in`] starts from: the console's
/// shared state and the request's signed session, taken together so each
/// handler names one thing instead of two extractors.
pub struct Visit {
    pub state: Shared,
    pub signed: Signed,
}

impl FromRequestParts<Shared> for Visit {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Shared) -> Result<Self, Response> {
        match parts.extensions.get::<Signed>() {
            Some(signed) => Ok(Visit {
                state: state.clone(),
                signed: signed.clone(),
            }),
            // A route mounted outside the guard: a bug of ours, never the visitor's.
            None => Err((
                StatusCode::INTERNAL_SERVER_ERROR,
                "this page was served without the console's sign-in check; report it to the operator\n",
            )
                .into_response()),
        }
    }
}

/// Lets a request through with its [`Signed`] session, or sends it to
/// sign in. A write the browser marks cross-site, or whose `Origin` is
/// not this console, is refused here whatever it carries.
pub async fn signed_in(State(state): State<Shared>, mut request: Request, next: Next) -> Response {
    if request.method() == Method::POST {
        if let Err(refused) = same_site(request.headers()) {
            return refused;
        }
    }
    let signed = session_id(request.headers(), state.tls).and_then(|id| {
        state
            .sessions
            .get(&id)
            .map(|session| Signed { id, session })
    });
    match signed {
        Some(signed) if signed.session.is_person() && !a_person_may(&request) => {
            if request.uri().path() == "/" {
                return Redirect::to("/tasks").into_response();
            }
            (
                StatusCode::FORBIDDEN,
                "people who signed in at the issuer see the tasks they may invoke (/tasks); the operator views need the admin or viewer token\n",
            )
                .into_response()
        }
        Some(signed) => {
            request.extensions_mut().insert(signed);
            next.run(request).await
        }
        None if request.method() == Method::GET => Redirect::to("/login").into_response(),
        None => (
            StatusCode::UNAUTHORIZED,
            "not signed in (or the session ended); sign in at /login\n",
        )
            .into_response(),
    }
}

/// What a person (signed in at the issuer) may reach: the tasks list,
/// a task's page, invoking it, their accounts and connecting one, live
/// updates, signing out.
fn a_person_may(request: &Request) -> bool {
    let path = request.uri().path();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (request.method().clone(), segments.as_slice()) {
        (Method::GET, ["tasks"] | ["tasks", _] | ["accounts"] | ["events"]) => true,
        (Method::POST, ["tasks", _, "invoke"] | ["accounts", _, "connect"] | ["logout"]) => true,
        _ => false,
    }
}

/// Refuses a write from another site: `Sec-Fetch-Site: cross-site`, or an
/// `Origin` whose host is not the `Host` this request came to.
pub fn same_site(headers: &HeaderMap) -> Result<(), Response> {
    let refuse = |why: &str| {
        Err((
            StatusCode::FORBIDDEN,
            format!("cross-site request refused: {why}; use the console's own pages\n"),
        )
            .into_response())
    };
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site")
    {
        return refuse("the browser says it came from another site");
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let origin_host = origin.split_once("://").map(|(_, h)| h).unwrap_or("");
        if origin_host != host {
            return refuse("its Origin is not this console");
        }
    }
    Ok(())
}

/// The security headers on every response, and `Server-Timing`: how
/// long SMS took to answer (browsers show it; the page timings read it).
pub async fn headers(request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let mut response = next.run(request).await;
    let took = started.elapsed().as_secs_f64() * 1000.0;
    let headers = response.headers_mut();
    if let Ok(timing) = HeaderValue::from_str(&format!("render;dur={took:.1}")) {
        headers.insert("server-timing", timing);
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

pub async fn css() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

pub async fn js() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "private, max-age=300"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.insert(*k, HeaderValue::from_static(v));
        }
        headers
    }

    #[test]
    fn writes_from_other_sites_are_refused() {
        assert!(same_site(&with(&[("host", "127.0.0.1:7380")])).is_ok());
        assert!(same_site(&with(&[
            ("host", "127.0.0.1:7380"),
            ("origin", "http://127.0.0.1:7380")
        ]))
        .is_ok());
        assert!(same_site(&with(&[
            ("host", "127.0.0.1:7380"),
            ("origin", "https://evil.example")
        ]))
        .is_err());
        assert!(same_site(&with(&[("sec-fetch-site", "cross-site")])).is_err());
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_under_tls() {
        let plain = cookie(false, "abc");
        assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Strict"));
        assert!(!plain.contains("Secure"));
        let tls = cookie(true, "abc");
        assert!(tls.starts_with("__Host-") && tls.contains("; Secure"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; spear_console=abc"),
        );
        assert_eq!(session_id(&headers, false).as_deref(), Some("abc"));
        assert_eq!(session_id(&headers, true), None);
    }
}
