//! Refusing before reading: [`Gate`] is the tower layer every Spear gRPC
//! port puts in front of its services. It looks at a request's headers and
//! its connection's [`Peer`] only, and answers a caller with no credential
//! (no certificate of ours, no valid admin token), a wrong token or a
//! revoked certificate with a gRPC error at once, so tonic never buffers
//! the body of a request nobody may make. The services still apply the
//! full matrix of [`Access`] to what passes.
//!
//! It also gives every call a deadline ([`Deadlines`]): a handler that has
//! not answered by then is answered `DEADLINE_EXCEEDED`, and its work
//! dropped, so no caller holds a port's resources forever. A stream counts
//! until its response starts (the registry watch then runs for as long as
//! the node follows it). A shorter `grpc-timeout` from the client wins.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tonic::Status;

use crate::access::Access;
use crate::incoming::Peer;

/// How long each call of a port may take: one default, and longer ones
/// for named calls (full gRPC paths, such as `/spear.v1.Tasks/Invoke`).
#[derive(Clone, Debug)]
pub struct Deadlines {
    default: Duration,
    longer: Arc<[(&'static str, Duration)]>,
}

impl Deadlines {
    pub fn new(default: Duration, longer: &[(&'static str, Duration)]) -> Self {
        Self {
            default,
            longer: longer.into(),
        }
    }

    fn for_path(&self, path: &str) -> Duration {
        self.longer
            .iter()
            .find(|(p, _)| *p == path)
            .map_or(self.default, |(_, d)| *d)
    }
}

impl Default for Deadlines {
    /// 30 s for every call: Spear's unary calls answer in milliseconds.
    fn default() -> Self {
        Self::new(Duration::from_secs(30), &[])
    }
}

/// The layer; build it with [`Access::gate`].
#[derive(Clone, Debug)]
pub struct Gate {
    access: Access,
    deadlines: Deadlines,
}

impl Access {
    /// The layer that applies [`Access::admit`] before a body is read.
    /// (Here rather than with `Access`, so the access rules need not know
    /// the layer that applies them.)
    pub fn gate(&self) -> Gate {
        Gate {
            access: self.clone(),
            deadlines: Deadlines::default(),
        }
    }
}

impl Gate {
    /// The calls' deadlines on this port.
    pub fn with_deadlines(mut self, deadlines: Deadlines) -> Self {
        self.deadlines = deadlines;
        self
    }
}

impl<S> tower_layer::Layer<S> for Gate {
    type Service = Gated<S>;

    fn layer(&self, inner: S) -> Gated<S> {
        Gated {
            inner,
            access: self.access.clone(),
            deadlines: self.deadlines.clone(),
        }
    }
}

/// A service behind the [`Gate`].
#[derive(Clone, Debug)]
pub struct Gated<S> {
    inner: S,
    access: Access,
    deadlines: Deadlines,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, R> tower_service::Service<http::Request<B>> for Gated<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Result<http::Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let admitted = self.access.admit_principal(
            request.uri().path(),
            request.extensions().get::<Peer>(),
            request
                .headers()
                .get(http::header::AUTHORIZATION)
                .map(|v| v.as_bytes()),
            request
                .headers()
                .get(crate::token::JOIN_TOKEN_HEADER)
                .map(|v| v.as_bytes()),
            request
                .headers()
                .contains_key(crate::access::PRINCIPAL_TOKEN_HEADER),
        );
        match admitted {
            Ok(()) => {
                let deadline = self.deadlines.for_path(request.uri().path());
                // A cheap clone (shared bytes), read only if the call is late.
                let uri = request.uri().clone();
                let answer = self.inner.call(request);
                Box::pin(async move {
                    match tokio::time::timeout(deadline, answer).await {
                        Ok(answered) => answered,
                        Err(_) => {
                            let call = uri.path().trim_start_matches('/');
                            tracing::debug!(call, ?deadline, "call past its deadline");
                            Ok(refusal(Status::deadline_exceeded(format!(
                                "{call} did not finish within {deadline:?}, this port's deadline for it"
                            ))))
                        }
                    }
                })
            }
            Err(status) => {
                tracing::debug!(
                    path = request.uri().path(),
                    message = status.message(),
                    "refused before reading"
                );
                Box::pin(std::future::ready(Ok(refusal(status))))
            }
        }
    }
}

fn refusal<R: Default>(status: Status) -> http::Response<R> {
    status.into_http()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::AdminToken;
    use tower_layer::Layer;
    use tower_service::Service;

    /// A handler that never answers.
    #[derive(Clone)]
    struct Stuck;

    impl Service<http::Request<()>> for Stuck {
        type Response = http::Response<()>;
        type Error = std::convert::Infallible;
        type Future = std::future::Pending<Result<http::Response<()>, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            std::future::pending()
        }
    }

    fn request(path: &str) -> http::Request<()> {
        http::Request::builder().uri(path).body(()).unwrap()
    }

    fn grpc_status(response: &http::Response<()>) -> Option<&str> {
        response
            .headers()
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_is_answered_deadline_exceeded() {
        let gate = Access::new(false, AdminToken::none())
            .gate()
            .with_deadlines(Deadlines::new(
                Duration::from_secs(30),
                &[("/spear.v1.Tasks/InvokeTask", Duration::from_secs(3600))],
            ));
        let mut gated = gate.layer(Stuck);
        let started = tokio::time::Instant::now();
        let answer = gated
            .call(request("/spear.v1.Status/GetStatus"))
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        // DEADLINE_EXCEEDED is gRPC code 4.
        assert_eq!(grpc_status(&answer), Some("4"));

        let started = tokio::time::Instant::now();
        let answer = gated
            .call(request("/spear.v1.Tasks/InvokeTask"))
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(3600));
        assert_eq!(grpc_status(&answer), Some("4"));
    }
}
