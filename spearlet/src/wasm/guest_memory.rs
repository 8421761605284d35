//! Reading and writing the guest's linear memory for host calls. Every
//! pointer and length from the guest is bounds-checked before use, and
//! sizes are capped before the host allocates.

use wasmtime::{Caller, Extern};

use spear_guest::errno::{EFAULT, EINVAL, ENOSPC};

/// Largest key, value or message the host accepts from a guest.
pub const MAX_INPUT: u32 = 1024 * 1024;

/// Why guest memory could not be read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error("a pointer or length is outside the guest's memory")]
    OutOfBounds,
    #[error("an argument is larger than the {MAX_INPUT} bytes the node accepts")]
    TooLarge,
    #[error("a text argument is not UTF-8")]
    NotUtf8,
    /// Not a failure the guest reports: its buffer is too small, and the
    /// needed size was written for it to retry.
    #[error("the output buffer is too small; the needed size was written to the length")]
    BufferTooSmall,
}

impl MemoryError {
    pub fn errno(self) -> i32 {
        match self {
            MemoryError::OutOfBounds => EFAULT,
            MemoryError::TooLarge | MemoryError::NotUtf8 => EINVAL,
            MemoryError::BufferTooSmall => ENOSPC,
        }
    }
}

/// The guest's exported memory.
fn memory<T>(caller: &mut Caller<'_, T>) -> Result<wasmtime::Memory, MemoryError> {
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => Err(MemoryError::OutOfBounds),
    }
}

/// Copies `len` bytes at `ptr` out of guest memory, refusing sizes over the cap.
pub fn read<T>(caller: &mut Caller<'_, T>, ptr: u32, len: u32) -> Result<Vec<u8>, MemoryError> {
    if len > MAX_INPUT {
        return Err(MemoryError::TooLarge);
    }
    let memory = memory(caller)?;
    let start = ptr as usize;
    let end = start
        .checked_add(len as usize)
        .ok_or(MemoryError::OutOfBounds)?;
    memory
        .data(&caller)
        .get(start..end)
        .map(<[u8]>::to_vec)
        .ok_or(MemoryError::OutOfBounds)
}

pub fn read_str<T>(caller: &mut Caller<'_, T>, ptr: u32, len: u32) -> Result<String, MemoryError> {
    String::from_utf8(read(caller, ptr, len)?).map_err(|_| MemoryError::NotUtf8)
}

/// Writes `bytes` to the guest buffer `out` whose capacity is at `out_len`;
/// on a short buffer writes the needed size there and fails with ENOSPC.
pub fn write_out<T>(
    caller: &mut Caller<'_, T>,
    out: u32,
    out_len: u32,
    bytes: &[u8],
) -> Result<(), MemoryError> {
    let memory = memory(caller)?;
    let len_at = out_len as usize..out_len as usize + 4;
    let data = memory.data_mut(&mut *caller);
    let capacity = data
        .get(len_at.clone())
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or(MemoryError::OutOfBounds)?;
    let needed = (bytes.len() as u32).to_le_bytes();
    if bytes.len() > capacity {
        data[len_at].copy_from_slice(&needed);
        return Err(MemoryError::BufferTooSmall);
    }
    let start = out as usize;
    let target = start
        .checked_add(bytes.len())
        .and_then(|end| data.get_mut(start..end))
        .ok_or(MemoryError::OutOfBounds)?;
    target.copy_from_slice(bytes);
    data[len_at].copy_from_slice(&needed);
    Ok(())
}
