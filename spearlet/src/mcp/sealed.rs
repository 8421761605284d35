//! A server's sealed values, opened for this connection. Entry point:
//! [`open`].
//!
//! SMS keeps a server file's literal `env` and `headers` values out of the
//! registry (they arrive sealed, in the spec's `sealed`), and opens them
//! for a node the server is for. The node asks when it connects the
//! server, puts them where the file had them, and keeps them in memory for
//! the connection only: never in its persisted registry, its `/registry`,
//! or its log (they join the log's redactions while the connection lives).

use std::sync::Arc;

use spear_proto::v1::{SealedPlace, ServerSpec};

use super::error::McpError;
use super::options::SessionOptions;
use crate::env_refs::{Redactor, Resolver};

/// `spec` with its sealed values in place.
pub struct Opened {
    pub spec: ServerSpec,
    /// The values, for the child's stderr redactor.
    pub values: Vec<String>,
    /// Keeps them out of the node's log while the connection lives.
    pub logs: Arc<Redactor>,
}

/// Opens `spec`'s sealed values through `options`' credentials; `None`
/// when it has none.
pub async fn open(spec: &ServerSpec, options: &SessionOptions) -> Result<Option<Opened>, McpError> {
    if spec.sealed.is_empty() {
        return Ok(None);
    }
    let credentials = options.credentials.as_ref().ok_or_else(|| {
        McpError::Sealed("this process has no link to SMS, which opens them for its nodes".into())
    })?;
    let values = credentials
        .open_sealed(&spec.id, &spec.sealed)
        .await
        .map_err(|e| McpError::Sealed(e.0))?;
    if values.len() != spec.sealed.len() {
        return Err(McpError::Sealed(format!(
            "SMS answered {} values for {} sealed ones",
            values.len(),
            spec.sealed.len()
        )));
    }
    let mut opened = spec.clone();
    for (sealed, value) in spec.sealed.iter().zip(&values) {
        let map = match SealedPlace::try_from(sealed.place) {
            Ok(SealedPlace::Header) => &mut opened.headers,
            _ => &mut opened.env,
        };
        map.insert(sealed.name.clone(), value.clone());
    }
    opened.sealed.clear();
    let logs = Resolver {
        secrets: values.clone(),
    }
    .redactor()
    .for_logs();
    Ok(Some(Opened {
        spec: opened,
        values,
        logs,
    }))
}
