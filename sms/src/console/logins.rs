//! Sign-ins and OAuth logins the console started and the browser has not
//! come back from. The browser returns from the issuer or authorization
//! server by a cross-site navigation, which carries no `SameSite=Strict`
//! cookie: the callback is matched by the request's `state` instead,
//! unguessable and used once. At most [`MAX_PENDING`] of each kind, each
//! for [`PENDING_FOR`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use spear_oauth::{PendingLogin, SignIn};

/// Started and not finished at once; a new one pushes out the oldest.
pub const MAX_PENDING: usize = 64;
/// How long the browser has to come back.
pub const PENDING_FOR: Duration = Duration::from_secs(600);

/// What waits for its callback, by the `state` it was started with.
pub struct Pending<T> {
    by_state: Mutex<HashMap<String, (T, Instant)>>,
}

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Pending {
            by_state: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Pending<T> {
    /// Keeps `value` until the callback that carries `state`.
    pub fn insert(&self, state: String, value: T) {
        let mut by_state = self.by_state.lock();
        by_state.retain(|_, (_, at)| at.elapsed() < PENDING_FOR);
        if by_state.len() >= MAX_PENDING {
            let oldest = by_state
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                by_state.remove(&oldest);
            }
        }
        by_state.insert(state, (value, Instant::now()));
    }

    /// What `state` names, once.
    pub fn take(&self, state: &str) -> Option<T> {
        let (value, at) = self.by_state.lock().remove(state)?;
        (at.elapsed() < PENDING_FOR).then_some(value)
    }
}

/// OAuth logins to servers: the server's id, the person connecting their
/// own account (`None`: an admin's login for the cluster), and the login.
pub type Logins = Pending<(String, Option<String>, PendingLogin)>;
/// People signing in at SMS's OpenID issuer: the sign-in, and the random
/// value its browser holds in a cookie (a callback from another browser,
/// login CSRF, does not match it).
pub type SignIns = Pending<(SignIn, String)>;
