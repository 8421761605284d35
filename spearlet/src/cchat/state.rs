//! What a guest's store holds for the cchat API. Its own file, below both
//! the host functions (`host_api.rs`) and the guest tool dispatcher
//! (`dispatch.rs`), which each take the store.

use super::sessions::{SessionDeps, Sessions};
use crate::wasm::GuestState;

/// What a run's store holds for the cchat API: its sessions and the
/// sentence of the last refused call.
pub struct ChatHost {
    pub sessions: Sessions,
    /// The sentence of the last refused cchat call, for `cchat_last_error`.
    pub(super) last_error: Option<String>,
    /// Lines a component guest wrote with `log.write` (bounded per run).
    pub(super) logged: u32,
}

impl ChatHost {
    pub fn new(deps: SessionDeps) -> Self {
        ChatHost {
            sessions: Sessions::new(deps),
            last_error: None,
            logged: 0,
        }
    }
}

/// A guest's store, as the cchat functions see it.
pub type ChatState = GuestState<ChatHost>;
