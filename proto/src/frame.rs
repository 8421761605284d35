//! Pre-encoded watch frames.
//!
//! SMS sends the same revision to every watching node. Encoding it once and
//! sharing the bytes (an `Arc`-counted [`Bytes`]) makes the cost of a change
//! independent of the number of streams, and a 10,000-server snapshot is
//! encoded once per revision however many nodes ask for it.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

use crate::v1::{FollowRequest, WatchEvent, WatchRequest};

/// A complete, already encoded `spear.v1.WatchEvent`.
#[derive(Clone, Debug)]
pub struct EncodedEvent(Bytes);

impl EncodedEvent {
    /// Encodes `event` once; clones of the result share the bytes.
    pub fn encode(event: &WatchEvent) -> Self {
        Self(Bytes::from(event.encode_to_vec()))
    }

    /// Wraps bytes that already hold one complete encoded `WatchEvent`
    /// (assembled by hand, for example from pre-encoded records).
    pub fn from_bytes(bytes: Bytes) -> Self {
        Self(bytes)
    }

    /// The encoded bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }

    /// Size on the wire, without gRPC framing.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True for an event with no fields set (never produced by SMS).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The codec of the shared streaming methods: requests (`Q`) are decoded
/// with prost, responses are copied out of their pre-encoded bytes.
#[derive(Debug, Clone, Copy)]
pub struct EncodedCodec<Q>(PhantomData<Q>);

impl<Q> Default for EncodedCodec<Q> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

/// `Watch`'s codec: a [`WatchRequest`] in, frames out.
pub type WatchCodec = EncodedCodec<WatchRequest>;
/// `Follow`'s codec: the node's [`FollowRequest`]s in, frames out.
pub type FollowCodec = EncodedCodec<FollowRequest>;

impl<Q: Message + Default + Send + 'static> Codec for EncodedCodec<Q> {
    type Encode = EncodedEvent;
    type Decode = Q;
    type Encoder = FrameEncoder;
    type Decoder = RequestDecoder<Q>;

    fn encoder(&mut self) -> Self::Encoder {
        FrameEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder(PhantomData)
    }
}

/// Writes a pre-encoded frame into the gRPC body.
#[derive(Debug, Default)]
pub struct FrameEncoder;

impl Encoder for FrameEncoder {
    type Item = EncodedEvent;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        dst.put_slice(&item.0);
        Ok(())
    }

    /// Small, as every Spear codec's: the buffer lives as long as the
    /// stream, and SMS holds one stream per node.
    fn buffer_settings(&self) -> tonic::codec::BufferSettings {
        crate::codec::buffer_settings()
    }
}

/// Decodes a request with prost.
#[derive(Debug)]
pub struct RequestDecoder<Q>(PhantomData<Q>);

impl<Q: Message + Default> Decoder for RequestDecoder<Q> {
    type Item = Q;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        Q::decode(src).map(Some).map_err(|e| {
            let name = std::any::type_name::<Q>()
                .rsplit("::")
                .next()
                .unwrap_or("request");
            Status::invalid_argument(format!("malformed {name}: {e}"))
        })
    }

    fn buffer_settings(&self) -> tonic::codec::BufferSettings {
        crate::codec::buffer_settings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{watch_event, Progress};

    #[test]
    fn encoded_event_decodes_as_watch_event() {
        let event = WatchEvent {
            event: Some(watch_event::Event::Progress(Progress {
                epoch: 7,
                revision: 42,
            })),
        };
        let frame = EncodedEvent::encode(&event);
        let back = WatchEvent::decode(frame.bytes().clone()).expect("decodes");
        assert_eq!(back, event);
    }
}
