//! Refusing before reading: [`Gate`] is the tower layer every Spear gRPC
//! port puts in front of its services. It looks at a request's headers and
//! its connection's [`Peer`] only, and answers a caller with no credential
//! (no certificate of ours, no valid admin token), a wrong token or a
//! revoked certificate with a gRPC error at once, so tonic never buffers
//! the body of a request nobody may make. The services still apply the
//! full matrix of [`Access`] to what passes.

use std::task::{Context, Poll};

use futures::future::{Either, Ready};
use tonic::Status;

use crate::access::Access;
use crate::incoming::Peer;

/// The layer; build it with [`Access::gate`].
#[derive(Clone, Debug)]
pub struct Gate {
    access: Access,
}

impl Gate {
    pub(crate) fn new(access: Access) -> Self {
        Self { access }
    }
}

impl<S> tower_layer::Layer<S> for Gate {
    type Service = Gated<S>;

    fn layer(&self, inner: S) -> Gated<S> {
        Gated {
            inner,
            access: self.access.clone(),
        }
    }
}

/// A service behind the [`Gate`].
#[derive(Clone, Debug)]
pub struct Gated<S> {
    inner: S,
    access: Access,
}

impl<S, B, R> tower_service::Service<http::Request<B>> for Gated<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>,
    R: Default,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<http::Response<R>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let admitted = self.access.admit(
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
        );
        match admitted {
            Ok(()) => Either::Left(self.inner.call(request)),
            Err(status) => {
                tracing::debug!(
                    path = request.uri().path(),
                    message = status.message(),
                    "refused before reading"
                );
                Either::Right(futures::future::ready(Ok(refusal(status))))
            }
        }
    }
}

fn refusal<R: Default>(status: Status) -> http::Response<R> {
    status.into_http()
}
