//! Where the authorization server sends the browser back: a listener on
//! the loopback interface (RFC 8252 §7.3), or the operator pasting the
//! address the browser ended on.

use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::Html;
use axum::routing::get;
use axum::Router;
use std::collections::HashMap;
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;

use crate::OAuthError;

/// The redirect of one login, kept for its step-ups (the authorization
/// server knows the client by this URI).
pub enum Redirect {
    Loopback {
        uri: String,
        callbacks: Mutex<mpsc::Receiver<String>>,
        server: JoinHandle<()>,
    },
    Paste {
        uri: String,
    },
}

impl Drop for Redirect {
    fn drop(&mut self) {
        if let Redirect::Loopback { server, .. } = self {
            server.abort();
        }
    }
}

impl Redirect {
    /// Listens on `127.0.0.1:port` (`0`: any free port) at `/callback`.
    pub async fn loopback(port: u16) -> Result<Redirect, OAuthError> {
        let addr = format!("127.0.0.1:{port}");
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|cause| OAuthError::Listen {
                addr: addr.clone(),
                cause,
            })?;
        let bound = listener.local_addr().map_err(|cause| OAuthError::Listen {
            addr: addr.clone(),
            cause,
        })?;
        let uri = format!("http://{bound}/callback");
        let (tx, rx) = mpsc::channel(4);
        let app = Router::new()
            .route("/callback", get(callback))
            .with_state((uri.clone(), tx));
        let server = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::warn!(%error, "the authorization redirect listener stopped");
            }
        });
        Ok(Redirect::Loopback {
            uri,
            callbacks: Mutex::new(rx),
            server,
        })
    }

    /// No listener: the operator pastes the address the browser was sent
    /// to (it fails to load; the code is in it).
    pub fn paste(port: u16) -> Redirect {
        Redirect::Paste {
            uri: format!("http://127.0.0.1:{port}/callback"),
        }
    }

    /// The redirect URI registered with the authorization server.
    pub fn uri(&self) -> &str {
        match self {
            Redirect::Loopback { uri, .. } | Redirect::Paste { uri } => uri,
        }
    }

    /// The full redirect URL of the next authorization, within `timeout`.
    /// An error the authorization server sent instead of a code becomes
    /// [`OAuthError::Denied`].
    pub async fn wait(&self, timeout: Duration) -> Result<String, OAuthError> {
        let url = match self {
            Redirect::Loopback { callbacks, .. } => {
                let mut callbacks = callbacks.lock().await;
                tokio::time::timeout(timeout, callbacks.recv())
                    .await
                    .map_err(|_| OAuthError::LoginTimedOut(timeout))?
                    .ok_or(OAuthError::LoginTimedOut(timeout))?
            }
            Redirect::Paste { uri } => {
                eprintln!("Paste the address your browser was sent to (it starts with {uri}):");
                let line = tokio::time::timeout(timeout, read_line())
                    .await
                    .map_err(|_| OAuthError::LoginTimedOut(timeout))??;
                line.trim().to_string()
            }
        };
        refused(&url)?;
        Ok(url)
    }
}

async fn read_line() -> Result<String, OAuthError> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| OAuthError::Paste(e.to_string()))?;
        if line.trim().is_empty() {
            return Err(OAuthError::Paste("nothing was pasted".into()));
        }
        Ok(line)
    })
    .await
    .map_err(|e| OAuthError::Paste(e.to_string()))?
}

/// The authorization server's `error` (RFC 6749 §4.1.2.1), if it sent one.
pub(crate) fn refused(url: &str) -> Result<(), OAuthError> {
    let Ok(parsed) = url::Url::parse(url) else {
        return Err(OAuthError::Paste(
            "that is not a URL; paste the whole address from the browser's address bar".into(),
        ));
    };
    let pairs: HashMap<String, String> = parsed.query_pairs().into_owned().collect();
    match pairs.get("error") {
        None => Ok(()),
        Some(error) => Err(OAuthError::Denied {
            error: error.clone(),
            description: pairs
                .get("error_description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default(),
        }),
    }
}

/// One redirect: handed to the waiting login, and a page for the browser.
async fn callback(
    State((uri, tx)): State<(String, mpsc::Sender<String>)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Html<&'static str> {
    let mut url = match url::Url::parse(&uri) {
        Ok(url) => url,
        Err(_) => return Html("Spear could not read this redirect."),
    };
    url.query_pairs_mut().extend_pairs(query.iter());
    let _ = tx.send(url.to_string()).await;
    Html("<!doctype html><title>Spear</title><p>Spear has the authorization. You can close this window.</p>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_loopback_redirect_hands_over_the_whole_callback() {
        let redirect = Redirect::loopback(0).await.unwrap();
        let uri = redirect.uri().to_string();
        assert!(uri.starts_with("http://127.0.0.1:") && uri.ends_with("/callback"));
        let get = tokio::spawn({
            let uri = uri.clone();
            async move {
                reqwest::get(format!(
                    "{uri}?code=abc&state=xyz&iss=https%3A%2F%2Fas.example"
                ))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
            }
        });
        let url = redirect.wait(Duration::from_secs(30)).await.unwrap();
        assert_eq!(
            url,
            format!("{uri}?code=abc&state=xyz&iss=https%3A%2F%2Fas.example")
        );
        assert!(get.await.unwrap().contains("You can close this window"));
    }

    #[tokio::test]
    async fn an_error_redirect_says_what_the_server_said() {
        let redirect = Redirect::loopback(0).await.unwrap();
        let uri = redirect.uri().to_string();
        tokio::spawn(async move {
            let _ = reqwest::get(format!(
                "{uri}?error=access_denied&error_description=the+user+said+no&state=s"
            ))
            .await;
        });
        let error = redirect
            .wait(Duration::from_secs(30))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "the authorization redirect did not carry a code: the authorization server answered 'access_denied': the user said no"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_login_nobody_finishes_times_out_with_a_sentence() {
        let redirect = Redirect::loopback(0).await.unwrap();
        let error = redirect
            .wait(Duration::from_secs(300))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("no authorization arrived within 300s"),
            "{error}"
        );
    }
}
