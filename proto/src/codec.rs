//! The codec every Spear service and client uses: prost's, with small
//! buffers.
//!
//! tonic allocates an encode buffer of `buffer_size` for every call and
//! keeps it for a stream's whole life (and a decode buffer per call).
//! Its default, 8 KiB, is sized for large messages; Spear's are small
//! (a heartbeat, a watch delta of a few hundred bytes), while SMS holds
//! one watch stream per node and takes a heartbeat from every node every
//! few seconds. A larger message still fits: the buffer grows by what the
//! message needs.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// Bytes allocated up front for a call's messages.
const BUFFER: usize = 1024;
/// tonic's default: a stream yields to others after this much encoded.
const YIELD_AFTER: usize = 32 * 1024;

/// The buffer settings of every Spear codec.
pub fn buffer_settings() -> BufferSettings {
    BufferSettings::new(BUFFER, YIELD_AFTER)
}

/// prost's `application/grpc+proto` with [`buffer_settings`].
#[derive(Debug, Clone)]
pub struct LeanCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(buffer_settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::new(buffer_settings())
    }
}
