//! The host side of the world's `session` resource: each method is the
//! core ABI's function of the same name on the run's [`Sessions`], with
//! the session's handle as the resource's representation (the resource
//! table is the sessions map itself). One difference, said in the WIT: a
//! session with guest tools cannot send with the automatic loop, since
//! the node cannot call back into a component waiting in `send`; the
//! SDKs run guest tools in their own loop of one-request sends.

use spear_guest::errno::{
    EACCES, EAGAIN, EBADMSG, EBUSY, EDQUOT, EEXIST, EINVAL, EIO, EMFILE, ENOENT, ENOMEM, ENOSPC,
    ETIMEDOUT,
};
use spear_guest::params::send_flags;
use wasmtime::component::Resource;

use super::bindings::spear::agent::cchat::{Host, HostSession};
use super::bindings::{Refusal, RefusalKind, SendMode, SessionHandle};
use super::ComponentChat;
use crate::cchat::{CallError, NoCallbacks, Sessions};

/// Longest sentence a refusal carries, as `cchat_last_error`'s.
const MAX_SENTENCE: usize = 1024;

/// What a call answers the guest: its value, a refusal, or a trap that
/// ends the run (a budget spent after the guest was told, a stop).
type Answer<T> = wasmtime::Result<Result<T, Refusal>>;

fn answer<T>(result: Result<T, CallError>) -> Answer<T> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(CallError::Refused { errno, sentence }) => Ok(Err(Refusal {
            kind: kind_of(errno),
            sentence: spear_common::text::prefix(&sentence, MAX_SENTENCE).to_string(),
        })),
        Err(CallError::Stop(reason)) => Err(wasmtime::Error::new(reason)),
        Err(CallError::Unwind(error)) => Err(error),
    }
}

fn kind_of(errno: i32) -> RefusalKind {
    match errno {
        EACCES => RefusalKind::Denied,
        ENOENT => RefusalKind::NotFound,
        EEXIST => RefusalKind::Exists,
        EMFILE | ENOSPC => RefusalKind::TooMany,
        ENOMEM => RefusalKind::OutOfMemory,
        EDQUOT => RefusalKind::BudgetSpent,
        EAGAIN => RefusalKind::QuotaSpent,
        ETIMEDOUT => RefusalKind::TimedOut,
        EBADMSG => RefusalKind::BadAnswer,
        EIO => RefusalKind::Failed,
        EBUSY => RefusalKind::Busy,
        // EINVAL, and EBADF, which a resource cannot meet.
        _ => RefusalKind::Invalid,
    }
}

fn handle(session: &Resource<SessionHandle>) -> i32 {
    session.rep() as i32
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

impl ComponentChat {
    fn sessions(&mut self) -> &mut Sessions {
        &mut self.host.sessions
    }
}

impl Host for ComponentChat {}

/// The world's `run-facts` holds only the facts' type.
impl super::bindings::spear::agent::run_facts::Host for ComponentChat {}

impl HostSession for ComponentChat {
    async fn create(&mut self) -> Answer<Resource<SessionHandle>> {
        answer(
            self.sessions()
                .create()
                .map(|handle| Resource::new_own(handle as u32)),
        )
    }

    async fn set_param(
        &mut self,
        session: Resource<SessionHandle>,
        key: String,
        value: String,
    ) -> Answer<()> {
        answer(
            self.sessions()
                .set_param(handle(&session), &key, value.as_bytes()),
        )
    }

    async fn get_param(&mut self, session: Resource<SessionHandle>, key: String) -> Answer<String> {
        answer(self.sessions().get_param(handle(&session), &key))
    }

    async fn write_msg(
        &mut self,
        session: Resource<SessionHandle>,
        role: String,
        text: String,
    ) -> Answer<()> {
        answer(self.sessions().write_msg(handle(&session), &role, &text))
    }

    async fn write_fn(&mut self, session: Resource<SessionHandle>, spec: String) -> Answer<u32> {
        answer(
            self.sessions()
                .write_fn(handle(&session), spec.as_bytes())
                .map(|id| id as u32),
        )
    }

    async fn send(&mut self, session: Resource<SessionHandle>, mode: SendMode) -> Answer<()> {
        answer(send(self.sessions(), handle(&session), mode).await)
    }

    async fn call_tool(
        &mut self,
        session: Resource<SessionHandle>,
        call: String,
    ) -> Answer<String> {
        let result = self
            .sessions()
            .call_tool(handle(&session), call.as_bytes())
            .await;
        answer(result.map(text))
    }

    async fn recv(&mut self, session: Resource<SessionHandle>) -> Answer<String> {
        let reply = self
            .sessions()
            .reply(handle(&session))
            .map(|reply| reply.to_vec());
        answer(reply.map(text))
    }

    async fn drop(&mut self, session: Resource<SessionHandle>) -> wasmtime::Result<()> {
        // A session the guest never managed to open has nothing to close.
        let _ = self.sessions().close(handle(&session));
        Ok(())
    }
}

/// `send` of session `handle`: the core ABI's, with no guest callbacks.
async fn send(sessions: &mut Sessions, handle: i32, mode: SendMode) -> Result<(), CallError> {
    let flags = match mode {
        SendMode::AutoLoop => {
            if sessions.has_guest_tools(handle)? {
                return Err(CallError::refused(
                    EINVAL,
                    "a component's session with guest tools cannot send with the automatic loop: the node does not call back into a component while it waits in send; send one-request and run the calls (the SDKs' Chat does)",
                ));
            }
            send_flags::AUTO_TOOL_CALLS
        }
        SendMode::OneRequest => 0,
        SendMode::NoTools => send_flags::NO_TOOLS,
    };
    let mut job = sessions.begin_send(handle, flags)?;
    let outcome = job.run(&mut NoCallbacks).await;
    sessions.finish_send(job, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_errno_is_its_kind_and_the_sentence_is_kept() {
        let refused = answer::<()>(Err(CallError::refused(EACCES, "permission denied: x")))
            .unwrap()
            .unwrap_err();
        assert_eq!(refused.kind, RefusalKind::Denied);
        assert_eq!(refused.sentence, "permission denied: x");
        assert_eq!(kind_of(EAGAIN), RefusalKind::QuotaSpent);
        assert_eq!(kind_of(ENOSPC), RefusalKind::TooMany);
        let long = "x".repeat(5000);
        let kept = answer::<()>(Err(CallError::refused(EINVAL, long)))
            .unwrap()
            .unwrap_err();
        assert_eq!(kept.sentence.len(), MAX_SENTENCE);
    }
}
