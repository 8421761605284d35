//! Why the launcher could not make a plan true: the step that failed and
//! the system's reason. Its sentence is what the node's [`crate::Report`]
//! carries (`refused`) and the server's status shows.

use std::error::Error;
use std::fmt::Display;

/// The cause of a failed step, whatever library gave it.
type Cause = Box<dyn Error + Send + Sync>;

/// One step of confining or starting a server that could not be done.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// A step failed for a reason the system gave: "cannot hide /proc:
    /// Permission denied (os error 13)".
    #[error("{step}: {cause}")]
    Failed {
        step: String,
        #[source]
        cause: Cause,
    },
    /// A step this plan or this machine makes impossible,
    /// said whole (what, and what to do).
    #[error("{0}")]
    Cannot(String),
}

impl Refusal {
    /// For `map_err`: "cannot `doing`", failed with the error given.
    pub fn cannot<E: Into<Cause>>(doing: impl Display) -> impl FnOnce(E) -> Refusal {
        Self::failed(format!("cannot {doing}"))
    }

    /// For `map_err`: `step` (worded whole), failed with the error given.
    pub fn failed<E: Into<Cause>>(step: impl Display) -> impl FnOnce(E) -> Refusal {
        let step = step.to_string();
        move |cause| Refusal::Failed {
            step,
            cause: cause.into(),
        }
    }
}
