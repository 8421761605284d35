//! Which backend and model a session talks to (docs/tasks.md, "Node policy"): the task's
//! choice by default; a guest may pick another with its `backend` and
//! `model` params, but only among what the task allows
//! (`llm.allowed_backends`, `llm.allowed_models`) *and* the node offers
//! (`[llm.backends]` and each backend's `models`). A pick outside either is
//! refused with the setting that would allow it.

use std::sync::Arc;

use spear_proto::task::LlmChoice;

use crate::llm::{BackendError, Backends, LlmBackend, Prices};

/// A backend a session can send to, with its name from the node's config.
#[derive(Clone)]
pub struct Chosen {
    pub name: String,
    pub backend: Arc<dyn LlmBackend>,
    /// The node's prices, for the cost of each request.
    pub prices: Arc<Prices>,
}

/// Why a session's `backend` or `model` was refused (`EACCES`).
#[derive(Debug, thiserror::Error)]
pub enum ModelRefused {
    #[error("backend '{0}' is not one the task allows (its llm.backend and llm.allowed_backends)")]
    BackendNotAllowed(String),
    #[error("model '{0}' is not one the task allows (its llm.model and llm.allowed_models)")]
    ModelNotAllowed(String),
    #[error("this run has one fixed backend; backend and model cannot change")]
    Fixed,
    #[error(transparent)]
    Node(#[from] BackendError),
}

/// What a run's sessions may talk to.
#[derive(Clone)]
pub struct Models {
    /// The node's backends; `None` for a run with one fixed backend
    /// (benchmarks, in-process tests).
    backends: Option<Arc<Backends>>,
    task: LlmChoice,
    default: Chosen,
}

impl Models {
    /// One backend, nothing to pick.
    pub fn fixed(name: &str, backend: Arc<dyn LlmBackend>) -> Models {
        Models {
            backends: None,
            task: LlmChoice::default(),
            default: Chosen {
                name: name.to_string(),
                backend,
                prices: Arc::new(Prices::default()),
            },
        }
    }

    /// The task's choice on the node's backends.
    pub fn of_task(backends: Arc<Backends>, task: &LlmChoice) -> Result<Models, BackendError> {
        let backend = backends.get(task.backend.as_deref(), task.model.as_deref())?;
        let name = backends
            .resolve_name(task.backend.as_deref())
            .unwrap_or_default()
            .to_string();
        let prices = backends.prices();
        Ok(Models {
            backends: Some(backends),
            task: task.clone(),
            default: Chosen {
                name,
                backend,
                prices,
            },
        })
    }

    /// What a new session talks to.
    pub fn default(&self) -> &Chosen {
        &self.default
    }

    /// The backend for a session's `backend` and `model` params (`None`:
    /// the task's).
    pub fn pick(&self, backend: Option<&str>, model: Option<&str>) -> Result<Chosen, ModelRefused> {
        if backend.is_none() && model.is_none() {
            return Ok(self.default.clone());
        }
        let Some(backends) = &self.backends else {
            return Err(ModelRefused::Fixed);
        };
        let task = &self.task;
        let task_backend = backends.resolve_name(task.backend.as_deref());
        let name = match backend {
            Some(b) if Some(b) == task_backend || task.allowed_backends.iter().any(|a| a == b) => b,
            Some(b) => return Err(ModelRefused::BackendNotAllowed(b.to_string())),
            None => task_backend.unwrap_or_default(),
        };
        // Without a model param: the task's model on its own backend, the
        // backend's default model on another.
        let model = match model {
            Some(m) => {
                let allowed = task.model.as_deref() == Some(m)
                    || task.allowed_models.iter().any(|a| a == m)
                    || backends.default_model(name) == Some(m);
                if !allowed {
                    return Err(ModelRefused::ModelNotAllowed(m.to_string()));
                }
                Some(m)
            }
            None if Some(name) == task_backend => task.model.as_deref(),
            None => None,
        };
        let chosen = backends.get(Some(name), model)?;
        Ok(Chosen {
            name: name.to_string(),
            backend: chosen,
            prices: backends.prices(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::LlmSection;

    /// Backend `a` (model `m`, also offering `m2` and `m3`) and `b` (`n`).
    fn models(task: LlmChoice) -> Models {
        let section: LlmSection = toml::from_str(
            r#"
            default = "a"
            [backends.a]
            kind = "openai"
            base_url = "http://127.0.0.1:1/v1"
            model = "m"
            models = ["m2", "m3"]
            [backends.b]
            kind = "anthropic"
            base_url = "http://127.0.0.1:1"
            model = "n"
            "#,
        )
        .unwrap();
        Models::of_task(Arc::new(Backends::new(section, |_| None).unwrap()), &task).unwrap()
    }

    #[test]
    fn a_pick_needs_the_task_and_the_node() {
        let keeping = models(LlmChoice::default());
        assert_eq!(keeping.default().name, "a");
        assert!(matches!(
            keeping.pick(Some("b"), None),
            Err(ModelRefused::BackendNotAllowed(_))
        ));
        assert!(matches!(
            keeping.pick(None, Some("m2")),
            Err(ModelRefused::ModelNotAllowed(_))
        ));
        assert!(
            keeping.pick(None, Some("m")).is_ok(),
            "the backend's own model"
        );

        let open = models(LlmChoice {
            allowed_backends: vec!["b".into()],
            allowed_models: vec!["m2".into(), "gpt-x".into()],
            ..LlmChoice::default()
        });
        let b = open.pick(Some("b"), None).unwrap();
        assert_eq!((b.name.as_str(), b.backend.model()), ("b", "n"));
        assert_eq!(open.pick(None, Some("m2")).unwrap().backend.model(), "m2");
        // The task allows gpt-x, the node offers it nowhere.
        assert!(matches!(
            open.pick(None, Some("gpt-x")),
            Err(ModelRefused::Node(_))
        ));
        assert!(matches!(
            open.pick(None, Some("m3")),
            Err(ModelRefused::ModelNotAllowed(_))
        ));
        assert!(matches!(
            Models::fixed("x", b.backend).pick(Some("a"), None),
            Err(ModelRefused::Fixed)
        ));
    }
}
