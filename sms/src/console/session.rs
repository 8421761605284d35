//! Who is signed in to the console: a token (admin or viewer) is
//! exchanged for a session, held here in memory and named by a random id
//! in an HttpOnly, SameSite=Strict cookie (Secure under TLS). Each session
//! carries its own CSRF token, which every write form sends back.
//!
//! Sessions live only in this SMS's memory: a restart signs everyone out,
//! which is what an operator expects of a console after an upgrade.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::RngCore;
use spear_identity::{AdminToken, ViewerToken};

/// How long a sign-in lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// The most sessions kept per role; beyond it the oldest of that role is
/// signed out. Per role, so signing in as a viewer over and over (the
/// viewer token is the more widely shared) never signs an admin out.
const MAX_SESSIONS: usize = 1024;

/// What a signed-in person may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything the admin API allows.
    Admin,
    /// Read every view; no write control is shown, and none is accepted.
    Viewer,
    /// Someone signed in at SMS's OpenID issuer: sees the tasks they may
    /// invoke and invokes them as themselves; no operator view.
    Person,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Viewer => "viewer",
            Role::Person => "person",
        }
    }
}

/// Who a person's session is for, and the ID token their runs are invoked
/// with. `Debug` does not show the token.
#[derive(Clone)]
pub struct Person {
    pub principal: spear_proto::v1::Principal,
    pub token: String,
}

impl std::fmt::Debug for Person {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Person")
            .field("principal", &self.principal.label())
            .finish_non_exhaustive()
    }
}

/// One signed-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    pub role: Role,
    /// Sent back in every write form.
    pub csrf: String,
    expires: Instant,
    /// The token it was opened with: when the token file changes (a
    /// rotation, or a revocation by emptying it), the session ends.
    opened_with: OpenedWith,
    /// A person's session: who, and their ID token.
    pub person: Option<std::sync::Arc<Person>>,
}

/// A token held to compare; never printed.
#[derive(Clone)]
struct OpenedWith(String);

impl std::fmt::Debug for OpenedWith {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<token>")
    }
}

/// Why a write was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WriteRefused {
    #[error("this session is read-only (viewer); sign in with the admin token to change anything")]
    Viewer,
    #[error("people who signed in at the issuer invoke the tasks meant for them and change nothing else; an operator signs in with the admin token")]
    Person,
    #[error("the form's CSRF token is missing or wrong; reload the page and try again")]
    Csrf,
}

impl Session {
    /// A form came from this session's own page: it carries its CSRF
    /// token (compared in constant time). Enough for a POST any role may
    /// make (sign-out, verify, explain).
    pub fn sent_by_us(&self, csrf: &str) -> Result<(), WriteRefused> {
        if constant_time_eq(csrf.as_bytes(), self.csrf.as_bytes()) {
            Ok(())
        } else {
            Err(WriteRefused::Csrf)
        }
    }

    /// A write is allowed: an admin's, with this session's CSRF token.
    pub fn may_write(&self, csrf: &str) -> Result<(), WriteRefused> {
        match self.role {
            Role::Admin => self.sent_by_us(csrf),
            Role::Viewer => Err(WriteRefused::Viewer),
            Role::Person => Err(WriteRefused::Person),
        }
    }

    /// An invocation is allowed: an admin's, or a person's as themselves
    /// (SMS then checks the task's "invokers"), with the CSRF token.
    pub fn may_invoke(&self, csrf: &str) -> Result<(), WriteRefused> {
        match self.role {
            Role::Admin | Role::Person => self.sent_by_us(csrf),
            Role::Viewer => Err(WriteRefused::Viewer),
        }
    }

    pub fn is_person(&self) -> bool {
        self.role == Role::Person
    }

    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

/// The console's sessions and the tokens that open them.
pub struct Sessions {
    admin: AdminToken,
    viewer: ViewerToken,
    by_id: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    pub fn new(admin: AdminToken, viewer: ViewerToken) -> Self {
        Self {
            admin,
            viewer,
            by_id: Mutex::new(HashMap::new()),
        }
    }

    /// Whether any token can sign in.
    pub fn can_sign_in(&self) -> bool {
        self.admin.is_set() || self.viewer.is_set()
    }

    /// Signs in with `token`: the new session's id, or `None` when the
    /// token is neither the admin's nor the viewer's.
    pub fn sign_in(&self, token: &str) -> Option<(String, Session)> {
        let role = if self.admin.matches(token) {
            Role::Admin
        } else if self.viewer.matches(token) {
            Role::Viewer
        } else {
            return None;
        };
        let session = Session {
            role,
            csrf: random_id(),
            expires: Instant::now() + SESSION_TTL,
            opened_with: OpenedWith(token.to_string()),
            person: None,
        };
        Some(self.open(session))
    }

    /// A session for `person`, signed in at the issuer, lasting as long as
    /// their ID token (`for_secs`) and at most [`SESSION_TTL`].
    pub fn sign_in_person(&self, person: Person, for_secs: u64) -> (String, Session) {
        let lasts = Duration::from_secs(for_secs).min(SESSION_TTL);
        let session = Session {
            role: Role::Person,
            csrf: random_id(),
            expires: Instant::now() + lasts,
            opened_with: OpenedWith(String::new()),
            person: Some(std::sync::Arc::new(person)),
        };
        self.open(session)
    }

    /// Keeps `session` under a new id, within the cap of its role.
    fn open(&self, session: Session) -> (String, Session) {
        let role = session.role;
        let id = random_id();
        let mut by_id = self.by_id.lock();
        let now = Instant::now();
        by_id.retain(|_, s| s.expires > now);
        let of_role = by_id.values().filter(|s| s.role == role).count();
        if of_role >= MAX_SESSIONS {
            let oldest = by_id
                .iter()
                .filter(|(_, s)| s.role == role)
                .min_by_key(|(_, s)| s.expires)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                by_id.remove(&oldest);
            }
        }
        by_id.insert(id.clone(), session.clone());
        (id, session)
    }

    /// The live session `id` names: not expired, and its token is still
    /// the one SMS reads from the token file.
    pub fn get(&self, id: &str) -> Option<Session> {
        let mut by_id = self.by_id.lock();
        let session = by_id.get(id)?;
        if session.expires > Instant::now() && self.still_holds(session) {
            return Some(session.clone());
        }
        by_id.remove(id);
        None
    }

    fn still_holds(&self, session: &Session) -> bool {
        let token = &session.opened_with.0;
        match session.role {
            Role::Admin => self.admin.matches(token),
            Role::Viewer => self.viewer.matches(token),
            // Good until it expires (its ID token's lifetime).
            Role::Person => true,
        }
    }

    pub fn sign_out(&self, id: &str) {
        self.by_id.lock().remove(id);
    }
}

/// 32 random bytes in hex.
pub(crate) fn random_id() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "admin-token-0123456789";
    const VIEWER: &str = "viewer-token-0123456789";

    fn sessions() -> Sessions {
        Sessions::new(AdminToken::fixed(ADMIN), ViewerToken::fixed(VIEWER))
    }

    #[test]
    fn tokens_open_sessions_of_their_role() {
        let sessions = sessions();
        assert!(sessions.sign_in("wrong-token-0123456789").is_none());
        assert!(sessions.sign_in("").is_none());
        let (id, admin) = sessions.sign_in(ADMIN).unwrap();
        assert_eq!(admin.role, Role::Admin);
        assert_eq!(sessions.get(&id).unwrap().role, Role::Admin);
        let (_, viewer) = sessions.sign_in(VIEWER).unwrap();
        assert_eq!(viewer.role, Role::Viewer);
        sessions.sign_out(&id);
        assert!(sessions.get(&id).is_none());
    }

    #[test]
    fn writes_need_the_admin_role_and_the_csrf_token() {
        let sessions = sessions();
        let (_, admin) = sessions.sign_in(ADMIN).unwrap();
        let (_, viewer) = sessions.sign_in(VIEWER).unwrap();
        assert_eq!(admin.may_write(&admin.csrf), Ok(()));
        assert_eq!(admin.may_write(""), Err(WriteRefused::Csrf));
        assert_eq!(admin.may_write(&viewer.csrf), Err(WriteRefused::Csrf));
        assert_eq!(viewer.may_write(&viewer.csrf), Err(WriteRefused::Viewer));
    }

    /// A token rotated (or revoked by emptying its file) ends the
    /// sessions it opened; the new token opens new ones.
    #[tokio::test(flavor = "multi_thread")]
    async fn rotating_a_token_ends_its_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("admin-token");
        std::fs::write(&file, ADMIN).unwrap();
        let sessions = Sessions::new(
            AdminToken::from_file(file.clone()).unwrap(),
            ViewerToken::none(),
        );
        let (id, _) = sessions.sign_in(ADMIN).unwrap();
        assert!(sessions.get(&id).is_some());
        std::fs::write(&file, "rotated-admin-token-0123456789").unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        while sessions.get(&id).is_some() {
            assert!(
                Instant::now() < deadline,
                "the old session outlived the rotation"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(sessions.sign_in(ADMIN).is_none());
        assert!(sessions.sign_in("rotated-admin-token-0123456789").is_some());
    }

    #[test]
    fn sessions_are_capped() {
        let sessions = sessions();
        let (first, _) = sessions.sign_in(ADMIN).unwrap();
        for _ in 0..MAX_SESSIONS {
            sessions.sign_in(ADMIN).unwrap();
        }
        assert!(sessions.get(&first).is_none());
        assert_eq!(sessions.by_id.lock().len(), MAX_SESSIONS);
    }

    #[test]
    fn viewers_never_sign_an_admin_out() {
        let sessions = sessions();
        let (admin, _) = sessions.sign_in(ADMIN).unwrap();
        let (first_viewer, _) = sessions.sign_in(VIEWER).unwrap();
        for _ in 0..MAX_SESSIONS + 10 {
            sessions.sign_in(VIEWER).unwrap();
        }
        assert_eq!(sessions.get(&admin).map(|s| s.role), Some(Role::Admin));
        assert!(sessions.get(&first_viewer).is_none());
        assert_eq!(sessions.by_id.lock().len(), MAX_SESSIONS + 1);
    }
}
