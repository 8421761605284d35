//! Reading and writing the guest's linear memory for host calls. Every
//! pointer and length from the guest is bounds-checked before use, and
//! sizes are capped before the host allocates.

use wasmtime::{Caller, Extern};

use super::host::GuestState;
use spear_guest::errno::{EFAULT, EINVAL, ENOSPC};

/// Largest key, value or message the host accepts from a guest.
pub const MAX_INPUT: u32 = 1024 * 1024;

/// The guest's exported memory.
fn memory(caller: &mut Caller<'_, GuestState>) -> Result<wasmtime::Memory, i32> {
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => Err(EFAULT),
    }
}

/// Copies `len` bytes at `ptr` out of guest memory, refusing sizes over the cap.
pub fn read(caller: &mut Caller<'_, GuestState>, ptr: u32, len: u32) -> Result<Vec<u8>, i32> {
    if len > MAX_INPUT {
        return Err(EINVAL);
    }
    let memory = memory(caller)?;
    let start = ptr as usize;
    let end = start.checked_add(len as usize).ok_or(EFAULT)?;
    memory
        .data(&caller)
        .get(start..end)
        .map(<[u8]>::to_vec)
        .ok_or(EFAULT)
}

pub fn read_str(caller: &mut Caller<'_, GuestState>, ptr: u32, len: u32) -> Result<String, i32> {
    String::from_utf8(read(caller, ptr, len)?).map_err(|_| EINVAL)
}

/// Writes `bytes` to the guest buffer `out` whose capacity is at `out_len`;
/// on a short buffer writes the needed size there and fails with ENOSPC.
pub fn write_out(
    caller: &mut Caller<'_, GuestState>,
    out: u32,
    out_len: u32,
    bytes: &[u8],
) -> Result<i32, i32> {
    let memory = memory(caller)?;
    let len_at = out_len as usize..out_len as usize + 4;
    let data = memory.data_mut(&mut *caller);
    let capacity = data
        .get(len_at.clone())
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or(EFAULT)?;
    let needed = (bytes.len() as u32).to_le_bytes();
    if bytes.len() > capacity {
        data[len_at].copy_from_slice(&needed);
        return Err(ENOSPC);
    }
    let start = out as usize;
    let target = start
        .checked_add(bytes.len())
        .and_then(|end| data.get_mut(start..end))
        .ok_or(EFAULT)?;
    target.copy_from_slice(bytes);
    data[len_at].copy_from_slice(&needed);
    Ok(0)
}
