//! How much a remote server's event streams may carry. A server answering
//! a call over SSE can send events without end (progress, log messages,
//! requests), each parsed by the node; rmcp bounds one event's size but
//! not their number. Entry point: [`bounded`], which wraps one stream in
//! a [`Budget`]:
//!
//! - a call's answer (the stream of a `POST`): at most
//!   [`MAX_EVENTS`] events and [`MAX_BYTES`] of data in all;
//! - a long-lived stream (the standalone `GET` stream, a legacy SSE
//!   session): the same in each minute ([`WINDOW`]).
//!
//! Past either the stream ends with [`StreamFlood`], whose sentence the
//! call's error (or the connection's) carries, and the connection's
//! [`FloodMark`] refuses to open its `GET` streams again until a window
//! has passed, so reconnecting buys the server nothing.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use sse_stream::{Error as SseError, Sse};
use tokio::time::Instant;

/// Events one stream may carry (per window for a long-lived one).
pub const MAX_EVENTS: u64 = 10_000;
/// Bytes of event data one stream may carry (per window for a long-lived one).
pub const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// A long-lived stream's window, and how long a flooded connection's
/// streams stay refused.
pub const WINDOW: Duration = Duration::from_secs(60);

/// A stream went past its budget.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the server sent more than {what} on one {stream}; the node stopped reading it (at most {MAX_EVENTS} events and {} MiB per stream, per minute on a long-lived one)", MAX_BYTES >> 20)]
pub struct StreamFlood {
    /// "10000 events" or "64 MiB".
    pub what: String,
    /// "response stream" or "event stream".
    pub stream: &'static str,
}

/// What one stream has spent.
#[derive(Debug)]
pub struct Budget {
    events: u64,
    bytes: u64,
    /// For a long-lived stream: when its window began.
    window: Option<Instant>,
}

impl Budget {
    /// The budget of one call's answer.
    pub fn per_response() -> Budget {
        Budget {
            events: 0,
            bytes: 0,
            window: None,
        }
    }

    /// The budget of a long-lived stream, renewed each [`WINDOW`].
    pub fn per_minute() -> Budget {
        Budget {
            events: 0,
            bytes: 0,
            window: Some(Instant::now()),
        }
    }

    /// Counts one event of `bytes` of data.
    pub fn spend(&mut self, bytes: usize) -> Result<(), StreamFlood> {
        if let Some(start) = self.window {
            if start.elapsed() >= WINDOW {
                *self = Budget::per_minute();
            }
        }
        self.events += 1;
        self.bytes = self.bytes.saturating_add(bytes as u64);
        let stream = match self.window {
            Some(_) => "event stream",
            None => "response stream",
        };
        if self.events > MAX_EVENTS {
            return Err(StreamFlood {
                what: format!("{MAX_EVENTS} events"),
                stream,
            });
        }
        if self.bytes > MAX_BYTES {
            return Err(StreamFlood {
                what: format!("{} MiB", MAX_BYTES >> 20),
                stream,
            });
        }
        Ok(())
    }
}

/// One connection's last flood: while it is recent, the connection opens
/// no `GET` stream.
#[derive(Debug, Clone, Default)]
pub struct FloodMark {
    last: Arc<Mutex<Option<(Instant, StreamFlood)>>>,
}

impl FloodMark {
    fn mark(&self, flood: &StreamFlood) {
        *self.last.lock() = Some((Instant::now(), flood.clone()));
    }

    /// The flood that still holds this connection's streams shut, if any.
    pub fn holding(&self) -> Option<StreamFlood> {
        let last = self.last.lock();
        match &*last {
            Some((at, flood)) if at.elapsed() < WINDOW => Some(flood.clone()),
            _ => None,
        }
    }
}

/// `stream` within `budget`: past it, one error saying so (said once in
/// the node's log too, marked on `mark`), then the end.
pub fn bounded<S>(
    stream: S,
    budget: Budget,
    mark: FloodMark,
) -> BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Sse, SseError>> + Send + 'static,
{
    let state = Some((Box::pin(stream), budget));
    futures::stream::unfold(state, move |state| {
        let mark = mark.clone();
        async move {
            let (mut stream, mut budget) = state?;
            let item = stream.next().await?;
            if let Ok(event) = &item {
                let bytes = event.data.as_ref().map_or(0, String::len);
                if let Err(flood) = budget.spend(bytes) {
                    tracing::warn!("{flood}");
                    mark.mark(&flood);
                    return Some((Err(SseError::Body(Box::new(flood))), None));
                }
            }
            Some((item, Some((stream, budget))))
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Result<Sse, SseError> {
        Ok(Sse {
            event: Some("message".into()),
            data: Some("{}".into()),
            id: None,
            retry: None,
        })
    }

    #[tokio::test]
    async fn a_response_stream_ends_after_its_events_with_the_sentence() {
        let endless = futures::stream::repeat_with(event);
        let mark = FloodMark::default();
        let items: Vec<_> = bounded(endless, Budget::per_response(), mark.clone())
            .collect()
            .await;
        assert_eq!(items.len() as u64, MAX_EVENTS + 1);
        let Some(Err(error)) = items.last() else {
            panic!("the last item is not the flood");
        };
        assert!(
            error
                .to_string()
                .contains("more than 10000 events on one response stream"),
            "{error}"
        );
        assert!(mark.holding().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_lived_stream_gets_its_budget_again_each_minute_and_the_mark_lapses() {
        let mut budget = Budget::per_minute();
        for _ in 0..MAX_EVENTS {
            budget.spend(10).unwrap_or_else(|e| panic!("{e}"));
        }
        tokio::time::advance(WINDOW).await;
        for _ in 0..MAX_EVENTS {
            budget.spend(10).unwrap_or_else(|e| panic!("{e}"));
        }
        let flood = budget.spend(10).unwrap_err();
        assert_eq!(flood.stream, "event stream");
        let mark = FloodMark::default();
        mark.mark(&flood);
        assert!(mark.holding().is_some());
        tokio::time::advance(WINDOW).await;
        assert!(mark.holding().is_none());
    }

    #[test]
    fn bytes_are_bounded_too() {
        let mut budget = Budget::per_response();
        budget
            .spend(MAX_BYTES as usize)
            .unwrap_or_else(|e| panic!("{e}"));
        let flood = budget.spend(1).unwrap_err();
        assert_eq!(flood.what, "64 MiB");
    }
}
