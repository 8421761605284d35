//! Thin gRPC services over SMS's domain core.

mod admin;
mod approvals;
mod audit;
mod credentials;
mod follow;
pub(crate) mod invokers;
mod nodes;
mod pins;
mod quotas;
mod registry;
mod reports;
mod revocations;
mod status;
mod tasks;

pub use admin::AdminService;
pub use approvals::ApprovalsService;
pub use audit::AuditService;
pub use credentials::CredentialsService;
pub use nodes::NodesService;
pub use pins::PinsService;
pub use quotas::QuotasService;
pub use registry::{RegistryService, MAX_WATCHES_PER_NODE};
pub use reports::Reports;
pub use revocations::RevocationsService;
pub use status::StatusService;
pub use tasks::TasksService;
