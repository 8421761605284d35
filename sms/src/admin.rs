//! Registry writes through the admin API, checked exactly like files.
//!
//! The admin API and the directory never silently overwrite each other: a
//! server declared by a file can only be changed by editing the file, and a
//! server created through the API can only be changed through the API.

use std::sync::Arc;

use spear_proto::v1::{source, AdminSource, ServerRecord, Source};

use crate::files::record_file;
use crate::registry::{check_server_id, parse_server_json, Problem};
use crate::sealed::Sealer;
use crate::store::{Change, Revision, StoreError};
use crate::writer::{RegistryWriter, WriteError};

/// Why an admin write was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{}", join(.0))]
    Invalid(Vec<Problem>),
    #[error(
        "server '{id}' is declared by file {file} in the MCP directory; change or remove it there"
    )]
    OwnedByFile { id: String, file: String },
    #[error("server '{0}' is not registered")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn join(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn admin_source() -> Source {
    Source {
        kind: Some(source::Kind::Admin(AdminSource {})),
    }
}

/// The admin write operations.
pub struct Admin {
    writer: Arc<RegistryWriter>,
    sealer: Sealer,
}

impl Admin {
    pub fn new(writer: Arc<RegistryWriter>, sealer: Sealer) -> Self {
        Self { writer, sealer }
    }

    /// Creates or replaces one server given in the native file shape.
    pub async fn upsert(&self, spec_json: &str) -> Result<Revision, AdminError> {
        let mut spec =
            parse_server_json("admin request", spec_json).map_err(AdminError::Invalid)?;
        self.sealer
            .seal("admin request", &mut spec)
            .map_err(AdminError::Invalid)?;
        let result = self
            .writer
            .apply(|view| {
                if let Some(file) = view.get(&spec.id).and_then(record_file) {
                    return Err(AdminError::OwnedByFile {
                        id: spec.id.clone(),
                        file: file.to_string(),
                    });
                }
                let record = ServerRecord {
                    spec: Some(spec.clone()),
                    source: Some(admin_source()),
                    mod_revision: 0,
                    pins: view.get(&spec.id).and_then(|r| r.pins.clone()),
                };
                let unchanged = view
                    .get(&spec.id)
                    .is_some_and(|r| r.spec == record.spec && r.source == record.source);
                Ok(if unchanged {
                    Change::default()
                } else {
                    Change {
                        upserts: vec![record],
                        deletes: vec![],
                    }
                })
            })
            .await;
        flatten(result)
    }

    /// Deletes one server created through the admin API.
    pub async fn delete(&self, id: &str) -> Result<Revision, AdminError> {
        check_server_id(id).map_err(|error| {
            AdminError::Invalid(vec![Problem {
                file: "admin request".into(),
                path: "$.id".into(),
                message: error.to_string(),
            }])
        })?;
        let result = self
            .writer
            .apply(|view| match view.get(id) {
                None => Err(AdminError::NotFound(id.to_string())),
                Some(record) => match record_file(record) {
                    Some(file) => Err(AdminError::OwnedByFile {
                        id: id.to_string(),
                        file: file.to_string(),
                    }),
                    None => Ok(Change {
                        upserts: vec![],
                        deletes: vec![id.to_string()],
                    }),
                },
            })
            .await;
        flatten(result)
    }
}

fn flatten(result: Result<Revision, WriteError<AdminError>>) -> Result<Revision, AdminError> {
    match result {
        Ok(revision) => Ok(revision),
        Err(WriteError::Rejected(error)) => Err(error),
        Err(WriteError::Store(error)) => Err(AdminError::Store(error)),
    }
}
