//! The admin bearer token.

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
                "admin calls need a token: pass `authorization: Bearer <token>` (sms --admin-token, or SMS_ADMIN_TOKEN)",
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
