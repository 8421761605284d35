//! Who an invocation through SMS is for, and whether they may start it
//! (docs/identities.md). Entry point: [`Invokers::principal`], then
//! [`Invokers::admit`] once the task is read.
//!
//! - A request with a principal token (`spear-principal-token`: an ID or
//!   access token of SMS's `--oidc-issuer`) is for the person or workload
//!   it names, once verified; the caller may be that person (no
//!   certificate needed for this one call) or an admin service acting for
//!   them. The task must list them in `"invokers"`.
//! - A request without one is for its caller, who must be an admin.
//!
//! Everything is checked before the task runs: an expired, foreign or
//! forged token, or a person not listed, never reaches a node.

use std::sync::Arc;

use spear_identity::{Access, Caller, OidcVerifier, TokenRefused, PRINCIPAL_TOKEN_HEADER};
use spear_proto::principal::{admitted, PERSON};
use spear_proto::v1::{Principal, TaskSpec};
use tonic::{Request, Status};

/// Why an invocation is refused for its principal.
#[derive(Debug, thiserror::Error)]
pub enum InvokerRefusal {
    #[error("a principal token was presented, but SMS trusts no OpenID Connect issuer; start it with --oidc-issuer and --oidc-audience, or invoke as an admin without one")]
    NoIssuer,
    #[error("the principal token is refused: {0}")]
    Token(#[from] TokenRefused),
    #[error("the principal token is not ASCII text")]
    Unreadable,
    #[error("{who} may not invoke task '{task}': the task's \"invokers\" do not list them; an admin adds \"subject:{subject}\" or one of their groups there")]
    NotListed {
        who: String,
        task: String,
        subject: String,
    },
}

impl From<InvokerRefusal> for Status {
    fn from(refusal: InvokerRefusal) -> Status {
        match refusal {
            InvokerRefusal::NotListed { .. } => Status::permission_denied(refusal.to_string()),
            InvokerRefusal::Token(TokenRefused::Unreachable(_)) => {
                Status::unavailable(refusal.to_string())
            }
            _ => Status::unauthenticated(refusal.to_string()),
        }
    }
}

/// The issuer SMS trusts, and the port's rules for admins.
#[derive(Clone)]
pub struct Invokers {
    pub access: Access,
    pub oidc: Option<Arc<OidcVerifier>>,
}

/// Who asked for a run and for whom. It has no `Debug`: the token is a
/// secret.
pub struct Invoking {
    pub caller: Caller,
    pub principal: Principal,
    /// The principal's verified token, which SMS delegates to the node
    /// for servers that act per principal.
    pub token: Option<String>,
}

impl Invokers {
    /// Who `request` is for: the verified principal token's subject, or
    /// the admin calling. Refused when neither holds.
    pub async fn principal<T>(&self, request: &Request<T>, call: &str) -> Result<Invoking, Status> {
        let Some(token) = request.metadata().get(PRINCIPAL_TOKEN_HEADER) else {
            let caller = self.access.admin(request, call)?;
            let principal = Principal::admin(&caller.to_string());
            return Ok(Invoking {
                caller,
                principal,
                token: None,
            });
        };
        // A wrong admin token is refused even beside a principal token.
        let caller = self.access.caller(request)?;
        let oidc = self.oidc.as_ref().ok_or(InvokerRefusal::NoIssuer)?;
        let token = token.to_str().map_err(|_| InvokerRefusal::Unreadable)?;
        let principal = oidc.verify(token).await.map_err(InvokerRefusal::from)?;
        Ok(Invoking {
            caller,
            principal,
            token: Some(token.to_string()),
        })
    }

    /// Whether `principal` may invoke `task`: admins always, a person when
    /// the task's `"invokers"` list them.
    pub fn admit(principal: &Principal, task: &TaskSpec) -> Result<(), InvokerRefusal> {
        if principal.kind != PERSON {
            return Ok(());
        }
        // A registered task's config was checked when it was registered.
        let invokers = spear_proto::task::parse_task_config(&task.config_json)
            .map(|c| c.invokers)
            .unwrap_or_default();
        if admitted(&invokers, principal) {
            return Ok(());
        }
        Err(InvokerRefusal::NotListed {
            who: principal.label(),
            task: task.id.clone(),
            subject: principal.subject.clone(),
        })
    }
}
