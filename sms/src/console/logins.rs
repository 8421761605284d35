//! OAuth logins the console started and the browser has not come back
//! from. The browser returns from the authorization server by a
//! cross-site navigation, which carries no `SameSite=Strict` cookie: the
//! callback is matched by the authorization request's `state` instead,
//! unguessable and used once. At most [`MAX_PENDING`], each for
//! [`PENDING_FOR`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use spear_oauth::PendingLogin;

/// Logins waiting at once; a new one pushes out the oldest.
pub const MAX_PENDING: usize = 16;
/// How long the browser has to come back.
pub const PENDING_FOR: Duration = Duration::from_secs(600);

struct Started {
    server_id: String,
    login: PendingLogin,
    at: Instant,
}

#[derive(Default)]
pub struct Logins {
    by_state: Mutex<HashMap<String, Started>>,
}

impl Logins {
    /// Keeps `login` for server `server_id` until its callback.
    pub fn insert(&self, server_id: &str, login: PendingLogin) {
        let mut by_state = self.by_state.lock();
        by_state.retain(|_, s| s.at.elapsed() < PENDING_FOR);
        if by_state.len() >= MAX_PENDING {
            let oldest = by_state
                .iter()
                .min_by_key(|(_, s)| s.at)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                by_state.remove(&oldest);
            }
        }
        by_state.insert(
            login.state_param.clone(),
            Started {
                server_id: server_id.to_string(),
                login,
                at: Instant::now(),
            },
        );
    }

    /// The login `state` names, once: the server and the login.
    pub fn take(&self, state: &str) -> Option<(String, PendingLogin)> {
        let started = self.by_state.lock().remove(state)?;
        (started.at.elapsed() < PENDING_FOR).then_some((started.server_id, started.login))
    }
}
