//! Entering a component: instantiate it in the run's store and call the
//! world's `run` with the run's input and facts (task, invocation, and
//! who the run is for).

use std::future::Future;
use std::pin::Pin;

use wasmtime::component::InstancePre;
use wasmtime::Store;

use super::bindings::{AgentPre, Facts};
use super::ComponentChat;
use crate::wasm::{Entered, GuestError};

/// The runtime's [`EnterComponent`](crate::wasm::EnterComponent) for the
/// cchat world.
pub fn enter<'a>(
    pre: &'a InstancePre<ComponentChat>,
    store: &'a mut Store<ComponentChat>,
    input: String,
) -> Pin<Box<dyn Future<Output = Entered> + Send + 'a>> {
    Box::pin(async move {
        let agent = AgentPre::new(pre.clone())?
            .instantiate_async(&mut *store)
            .await?;
        let sessions = &store.data().host.sessions;
        let (task_id, invocation_id) = sessions.run_ids();
        let facts = Facts {
            task_id,
            invocation_id,
            principal: Some(sessions.principal()),
        };
        let answer = agent.call_run(&mut *store, &input, &facts).await?;
        Ok(answer.map_err(GuestError))
    })
}
