//! The first look at a request (every port's `Gate`): its path, connection and token headers
//! alone, before its body is read; and the end of a revoked caller's open streams.

use tonic::{Request, Status};

use super::{wrong_join_token, wrong_token, Access, NEEDS_CERT};
use crate::incoming::Peer;
use crate::token::Presented;

/// Calls anyone may make: the standard health check.
const OPEN_PREFIX: &str = "/grpc.health.v1.Health/";

/// The one call a node makes before it has a credential.
const JOIN_PATH: &str = "/spear.v1.Nodes/Join";

/// The one call a person may make with only their OpenID Connect token:
/// the call itself verifies it before anything runs.
const INVOKE_PATH: &str = "/spear.v1.Tasks/InvokeTask";

impl Access {
    /// Resolves when the caller's certificate is revoked (never, when it
    /// showed none): long-lived streams end with it, so a revoked node
    /// loses its open watch as well as its next call.
    pub fn until_revoked<T>(
        &self,
        request: &Request<T>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let holder = request
            .extensions()
            .get::<Peer>()
            .and_then(|p| p.identity.clone().map(|i| (i, p.serial.clone())));
        let deny = self.deny.clone();
        let mut changes = deny.subscribe();
        async move {
            let Some((identity, serial)) = holder else {
                return std::future::pending().await;
            };
            loop {
                if deny.refuses(&identity, serial.as_deref()) {
                    return;
                }
                if changes.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }

    /// The first look at a request, from its path, its connection and its
    /// `authorization` and `spear-join-token` headers alone: a wrong token
    /// or a revoked certificate is refused; on a TLS port so is a caller
    /// with neither a certificate of ours nor the admin token, except for
    /// the health check.
    pub fn admit(
        &self,
        path: &str,
        peer: Option<&Peer>,
        authorization: Option<&[u8]>,
        join: Option<&[u8]>,
    ) -> Result<(), Status> {
        self.admit_principal(path, peer, authorization, join, false)
    }

    /// [`Access::admit`], for a request that may carry a principal's token
    /// (`principal`): an invocation with one passes to be verified by the
    /// call, on a TLS port too.
    pub fn admit_principal(
        &self,
        path: &str,
        peer: Option<&Peer>,
        authorization: Option<&[u8]>,
        join: Option<&[u8]>,
        principal: bool,
    ) -> Result<(), Status> {
        // A joining node has no credential yet: its join token, in the
        // body, is checked by the call itself, once.
        if path.starts_with(OPEN_PREFIX) || path == JOIN_PATH {
            return Ok(());
        }
        match self.token.presented_in(authorization) {
            Presented::Valid => return Ok(()),
            Presented::Wrong => return Err(wrong_token()),
            Presented::None => {}
        }
        if !self.secure && self.join.presented_in(join) == Presented::Wrong {
            return Err(wrong_join_token());
        }
        if let Some(Err(refused)) = self.plaintext_node(join) {
            return Err(refused);
        }
        match peer.and_then(|p| p.identity.as_ref().map(|i| (i, p.serial.as_deref()))) {
            Some((identity, serial)) if self.deny.refuses(identity, serial) => {
                Err(Status::unauthenticated(format!(
                    "the certificate for {identity} has been revoked; ask an admin for a new one"
                )))
            }
            Some(_) => Ok(()),
            None if !self.secure => Ok(()),
            None if principal && path == INVOKE_PATH => Ok(()),
            None => {
                let call = path.trim_start_matches('/');
                let or_token = if self.token.is_set() {
                    " or the admin token"
                } else {
                    ""
                };
                let or_person = if path == INVOKE_PATH {
                    "; a person invokes with their OpenID Connect token instead (sms invoke --principal-token)"
                } else {
                    ""
                };
                Err(Status::unauthenticated(format!(
                    "{call} refused before it was read: {NEEDS_CERT}{or_token}{or_person}"
                )))
            }
        }
    }
}
