//! The admin bearer token, checked by SMS on admin calls and by nodes on
//! invocations: one token for an installation (`sms --admin-token`,
//! `spearlet run --admin-token`), carried as `authorization: Bearer <token>`.

use tonic::{Request, Status};

/// The token admin writes must carry once one is configured. Comparison is
/// constant-time; the token is never logged or echoed.
#[derive(Clone, Default)]
pub struct AdminToken(Option<String>);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "AdminToken(<set>)"
        } else {
            "AdminToken(<none>)"
        })
    }
}

impl AdminToken {
    pub fn new(token: Option<String>) -> Self {
        Self(token.filter(|t| !t.is_empty()))
    }

    /// True when calls must carry a token.
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// Adds `authorization: Bearer <token>` to an outgoing request, when a
    /// token is set (SMS forwarding an invocation to a node).
    pub fn attach<T>(&self, request: &mut Request<T>) {
        if let Some(value) = self
            .0
            .as_ref()
            .and_then(|t| format!("Bearer {t}").parse().ok())
        {
            request.metadata_mut().insert("authorization", value);
        }
    }

    /// Refuses `request` unless it carries `authorization: Bearer <token>`.
    pub fn check<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let Some(expected) = &self.0 else {
            return Ok(());
        };
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match presented {
            Some(token) if constant_time_eq(token.as_bytes(), expected.as_bytes()) => Ok(()),
            Some(_) => Err(Status::unauthenticated("the admin token is wrong; pass the token SMS was started with")),
            None => Err(Status::unauthenticated(
                "this call needs the admin token: pass `authorization: Bearer <token>` (the sms CLI's --token, or SMS_ADMIN_TOKEN)",
            )),
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_auth(value: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(v) = value {
            r.metadata_mut().insert("authorization", v.parse().unwrap());
        }
        r
    }

    #[test]
    fn token_is_required_once_set() {
        let token = AdminToken::new(Some("s3cret".into()));
        assert!(token.check(&with_auth(None)).is_err());
        assert!(token.check(&with_auth(Some("Bearer nope"))).is_err());
        assert!(token.check(&with_auth(Some("s3cret"))).is_err());
        assert!(token.check(&with_auth(Some("Bearer s3cret"))).is_ok());
        let err = token.check(&with_auth(Some("Bearer nope"))).unwrap_err();
        assert!(!err.message().contains("s3cret"));
    }

    #[test]
    fn no_token_means_open() {
        assert!(AdminToken::new(None).check(&with_auth(None)).is_ok());
        assert!(AdminToken::new(Some(String::new()))
            .check(&with_auth(None))
            .is_ok());
    }
}
