//! One run of a component: the same store limits, CPU clock, wall
//! deadline and guest threads as a module's run (`runtime.rs`), entered
//! through the embedder's [`EnterComponent`] instead of `_start`. What the
//! entry point returns is the run's output; its error goes to standard
//! error with exit code 1, as a `main` that failed.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{InstancePre as ComponentPre, ResourceTable};
use wasmtime::Store;

use super::component::ComponentState;
use super::cpu::Metered;
use super::limiter::GuestLimiter;
use super::limits::GuestLimits;
use super::outcome::GuestOutcome;
use super::runtime::{ending, GuestRuntime};
use super::store::{prepare, GuestRun, Prepared};

/// Core instances a component may have (a Python component has a few: its
/// interpreter, libc, the WASI adapter); a module has one.
const COMPONENT_INSTANCES: usize = 64;

impl<H: Send + 'static> GuestRuntime<H> {
    /// A fresh store for one component run; see `store` for a module's.
    pub(super) fn component_store(
        &self,
        run: GuestRun<H>,
        limits: GuestLimits,
    ) -> Result<Prepared<ComponentState<H>>, (String, H)> {
        prepare(run, &limits, |mut wasi, cpu, host| {
            let mut store = Store::new(
                &self.engine,
                ComponentState {
                    wasi: wasi.build(),
                    table: ResourceTable::new(),
                    limits: GuestLimiter::for_component(
                        limits.memory_bytes,
                        limits.table_elements,
                        COMPONENT_INSTANCES,
                    ),
                    cpu,
                    host,
                },
            );
            store.limiter(|s| &mut s.limits);
            store
        })
    }

    /// Runs the component's entry point once with the run's input (its
    /// stdin, as text) on the guests' own threads.
    pub(super) async fn run_component(
        &self,
        pre: &ComponentPre<ComponentState<H>>,
        run: GuestRun<H>,
        limits: GuestLimits,
    ) -> GuestOutcome<H> {
        let started = Instant::now();
        let deadline = run.deadline;
        let Some((_, enter)) = self.components.as_ref().map(|(l, e)| (l, *e)) else {
            let why = "this node's runtime was built without the component world".to_string();
            return GuestOutcome::stopped(why, started, Some(run.host));
        };
        let input = String::from_utf8_lossy(&run.stdin).into_owned();
        let Prepared {
            mut store,
            stdout,
            stderr,
        } = match self.component_store(run, limits) {
            Ok(prepared) => prepared,
            Err((why, host)) => return GuestOutcome::stopped(why, started, Some(host)),
        };
        let pre = pre.clone();
        let clock = Arc::clone(&store.data().cpu);
        let run = async move {
            let call = enter(&pre, &mut store, input);
            let result = tokio::time::timeout_at(deadline.into(), call).await;
            (result, store)
        };
        let (result, store) = match self.threads.spawn(Metered::new(run, clock)).await {
            Ok(ended) => ended,
            Err(error) => {
                let why = format!("the guest run failed: {error}");
                return GuestOutcome::stopped(why, started, None);
            }
        };
        let mut out = stdout.contents().to_vec();
        let mut err = stderr.contents().to_vec();
        // The entry point's answer: the output, or the error and exit 1.
        let result = result.map(|entered| match entered {
            Ok(Ok(answer)) => {
                append_bounded(&mut out, answer.as_bytes(), limits.output_bytes);
                Ok(0)
            }
            Ok(Err(error)) => {
                append_bounded(&mut err, error.0.as_bytes(), limits.output_bytes);
                Ok(1)
            }
            Err(trap) => Err(trap),
        });
        let refused = store.data().limits.refused();
        let (exit_code, error) = match result {
            Ok(Ok(code)) => (Some(code), None),
            Ok(Err(trap)) => ending(Ok(Err(trap)), refused),
            Err(_) => ending(Err(limits.wall), refused),
        };
        GuestOutcome {
            exit_code,
            error,
            stdout: out,
            stderr: err,
            duration: started.elapsed(),
            cpu: store.data().cpu.used(),
            host: Some(store.into_data().host),
        }
    }
}

/// Appends what fits of `more` to `to`, kept within `bound` bytes as the
/// output pipes are.
fn append_bounded(to: &mut Vec<u8>, more: &[u8], bound: usize) {
    let room = bound.saturating_sub(to.len());
    to.extend_from_slice(&more[..more.len().min(room)]);
}

#[cfg(test)]
mod tests {
    use super::append_bounded;

    #[test]
    fn the_answer_is_bounded_like_the_output() {
        let mut out = b"printed ".to_vec();
        append_bounded(&mut out, b"answer", 11);
        assert_eq!(out, b"printed ans");
        append_bounded(&mut out, b"more", 11);
        assert_eq!(out, b"printed ans");
    }
}
