//! Encoding of watch frames, done once per revision.
//!
//! Snapshot frames are assembled from each server's already encoded record,
//! so building a snapshot of N servers is N buffer copies and no per-record
//! protobuf work, and the result is shared by every stream that needs it.

use bytes::{BufMut, Bytes, BytesMut};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};
use prost::Message;
use spear_proto::frame::EncodedEvent;
use spear_proto::v1::{watch_event, Delta, Progress, ServerRecord, WatchEvent};

use crate::store::{Committed, Epoch, Revision};

/// Frames are kept well under gRPC's default 4 MiB message limit.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// Field numbers of `WatchEvent.snapshot` and of `SnapshotFrame`'s fields.
const EVENT_SNAPSHOT: u32 = 1;
const FRAME_EPOCH: u32 = 1;
const FRAME_REVISION: u32 = 2;
const FRAME_INDEX: u32 = 3;
const FRAME_TOTAL: u32 = 4;
const FRAME_SERVERS: u32 = 5;

/// Encodes a record once, for reuse in every later snapshot.
pub fn encode_record(record: &ServerRecord) -> Bytes {
    Bytes::from(record.encode_to_vec())
}

/// A committed change as one watch frame.
pub fn delta_frame(epoch: Epoch, committed: &Committed) -> EncodedEvent {
    EncodedEvent::encode(&WatchEvent {
        event: Some(watch_event::Event::Delta(Delta {
            epoch,
            revision: committed.revision,
            prev_revision: committed.prev_revision,
            upserts: committed.upserts.clone(),
            deletes: committed.deletes.clone(),
        })),
    })
}

/// A heartbeat frame.
pub fn progress_frame(epoch: Epoch, revision: Revision) -> EncodedEvent {
    EncodedEvent::encode(&WatchEvent {
        event: Some(watch_event::Event::Progress(Progress { epoch, revision })),
    })
}

/// Splits already encoded records into snapshot frames of at most
/// [`MAX_FRAME_BYTES`] (a single larger record gets a frame of its own).
/// An empty registry is one empty frame, so a node always learns the
/// snapshot's revision.
pub fn snapshot_frames<'a>(
    epoch: Epoch,
    revision: Revision,
    records: impl Iterator<Item = &'a Bytes>,
) -> Vec<EncodedEvent> {
    let mut chunks: Vec<Vec<&Bytes>> = vec![Vec::new()];
    let mut chunk_bytes = 0usize;
    for record in records {
        let size = field_len(record.len());
        let current_is_empty = chunks.last().is_none_or(|c| c.is_empty());
        if chunk_bytes + size > MAX_FRAME_BYTES && !current_is_empty {
            chunks.push(Vec::new());
            chunk_bytes = 0;
        }
        chunk_bytes += size;
        if let Some(chunk) = chunks.last_mut() {
            chunk.push(record);
        }
    }
    let total = chunks.len() as u64;
    chunks
        .iter()
        .enumerate()
        .map(|(index, chunk)| encode_snapshot_frame(epoch, revision, index as u64, total, chunk))
        .collect()
}

fn encode_snapshot_frame(
    epoch: Epoch,
    revision: Revision,
    index: u64,
    total: u64,
    records: &[&Bytes],
) -> EncodedEvent {
    let mut frame = BytesMut::new();
    put_uint(&mut frame, FRAME_EPOCH, epoch);
    put_uint(&mut frame, FRAME_REVISION, revision);
    put_uint(&mut frame, FRAME_INDEX, index);
    put_uint(&mut frame, FRAME_TOTAL, total);
    for record in records {
        put_bytes(&mut frame, FRAME_SERVERS, record);
    }
    let mut event = BytesMut::with_capacity(field_len(frame.len()));
    put_bytes(&mut event, EVENT_SNAPSHOT, &frame);
    EncodedEvent::from_bytes(event.freeze())
}

fn put_uint(buf: &mut BytesMut, field: u32, value: u64) {
    if value != 0 {
        encode_key(field, WireType::Varint, buf);
        encode_varint(value, buf);
    }
}

fn put_bytes(buf: &mut BytesMut, field: u32, value: &[u8]) {
    encode_key(field, WireType::LengthDelimited, buf);
    encode_varint(value.len() as u64, buf);
    buf.put_slice(value);
}

/// Bytes taken by a length-delimited field of `len` bytes (tag under 16).
fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

#[cfg(test)]
mod tests {
    use super::*;
    use spear_proto::v1::{ServerSpec, SnapshotFrame};

    fn record(id: &str, pad: usize) -> ServerRecord {
        ServerRecord {
            spec: Some(ServerSpec {
                id: id.to_string(),
                description: "x".repeat(pad),
                enabled: true,
                ..Default::default()
            }),
            source: None,
            mod_revision: 3,
            pins: None,
        }
    }

    fn decode(frame: &EncodedEvent) -> SnapshotFrame {
        match WatchEvent::decode(frame.bytes().clone()).map(|e| e.event) {
            Ok(Some(watch_event::Event::Snapshot(s))) => s,
            other => panic!("not a snapshot frame: {other:?}"),
        }
    }

    #[test]
    fn hand_encoded_frames_decode_as_the_proto_says() {
        let records: Vec<ServerRecord> = (0..5).map(|i| record(&format!("s{i}"), 10)).collect();
        let encoded: Vec<Bytes> = records.iter().map(encode_record).collect();
        let frames = snapshot_frames(9, 12, encoded.iter());
        assert_eq!(frames.len(), 1);
        let frame = decode(&frames[0]);
        assert_eq!(
            (frame.epoch, frame.revision, frame.index, frame.total),
            (9, 12, 0, 1)
        );
        assert_eq!(frame.servers, records);
    }

    #[test]
    fn big_snapshots_are_chunked_under_the_limit_and_keep_every_record() {
        let records: Vec<ServerRecord> = (0..300)
            .map(|i| record(&format!("s{i:03}"), 10_000))
            .collect();
        let encoded: Vec<Bytes> = records.iter().map(encode_record).collect();
        let frames = snapshot_frames(1, 2, encoded.iter());
        assert!(frames.len() >= 3, "{} frames", frames.len());
        let mut seen = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            assert!(
                f.len() <= MAX_FRAME_BYTES + 16,
                "frame {i} is {} bytes",
                f.len()
            );
            let frame = decode(f);
            assert_eq!(frame.index as usize, i);
            assert_eq!(frame.total as usize, frames.len());
            seen.extend(frame.servers);
        }
        assert_eq!(seen, records);
    }

    #[test]
    fn an_empty_registry_is_one_empty_frame() {
        let frames = snapshot_frames(4, 0, std::iter::empty());
        assert_eq!(frames.len(), 1);
        let frame = decode(&frames[0]);
        assert_eq!((frame.epoch, frame.total, frame.servers.len()), (4, 1, 0));
    }
}
