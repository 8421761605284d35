//! SMS's gRPC services, each a thin face over its domain core, built from
//! the hub, the node table, the stores and the keys; and the server that
//! serves them behind the gate, each decoding what its calls need and no
//! more, every call with a deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use spear_identity::{incoming, Access, Deadlines, JoinToken, TlsIdentity};
use spear_proto::defaults;
use spear_proto::shared_registry::registry_server::RegistryServer;
use spear_proto::v1::admin_server::AdminServer;
use spear_proto::v1::approvals_server::ApprovalsServer;
use spear_proto::v1::audit_server::AuditServer;
use spear_proto::v1::credentials_server::CredentialsServer;
use spear_proto::v1::nodes_server::NodesServer;
use spear_proto::v1::pins_server::PinsServer;
use spear_proto::v1::quotas_server::QuotasServer;
use spear_proto::v1::revocations_server::RevocationsServer;
use spear_proto::v1::status_server::StatusServer;
use spear_proto::v1::tasks_server::TasksServer;
use tokio::net::TcpListener;

use super::stores::{Keys, Stores};
use crate::admin::Admin;
use crate::audit::AdminAudit;
use crate::events::TrustEvents;
use crate::files::FileProblems;
use crate::grpc::{
    AdminService, ApprovalsService, AuditService, CredentialsService, NodesService, PinsService,
    QuotasService, RegistryService, Reports, RevocationsService, StatusService, TasksService,
};
use crate::nodes::NodeTable;
use crate::oauth::Broker;
use crate::pins::PinBook;
use crate::revocations::Revocations;
use crate::tasks::Invoker;
use crate::watch::Hub;
use crate::writer::RegistryWriter;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// What the services are built from.
pub struct ServicesDeps {
    pub hub: Arc<Hub>,
    pub nodes: Arc<NodeTable>,
    pub problems: Arc<FileProblems>,
    pub writer: Arc<RegistryWriter>,
    pub stores: Stores,
    pub keys: Keys,
    pub revocations: Arc<Revocations>,
    pub access: Access,
    pub tls: Option<TlsIdentity>,
    pub join_token: JoinToken,
    /// SMS's CA, signing joining nodes' certificates (`--ca-dir`).
    pub ca_dir: Option<std::path::PathBuf>,
    pub max_watches_per_node: usize,
    /// Where the OAuth client may go when a server's metadata says.
    pub egress: spear_egress::EgressPolicy,
    pub insecure: bool,
    /// The issuer whose people and workloads may invoke (`--oidc-issuer`).
    pub oidc: Option<Arc<spear_identity::OidcVerifier>>,
}

/// Each service behind an `Arc`: the gRPC server and the console
/// (which calls them in process, [`crate::console::Api`]) share them.
pub struct Services {
    registry: Arc<RegistryService>,
    admin: Arc<AdminService>,
    nodes: Arc<NodesService>,
    pins: Arc<PinsService>,
    approvals: Arc<ApprovalsService>,
    quotas: Arc<QuotasService>,
    audit: Arc<AuditService>,
    status: Arc<StatusService>,
    tasks: Arc<TasksService>,
    credentials: Arc<CredentialsService>,
    revocations: Arc<RevocationsService>,
    events: TrustEvents,
    broker: Arc<Broker>,
}

impl Services {
    pub fn build(deps: ServicesDeps) -> Services {
        let ServicesDeps {
            hub,
            nodes,
            problems,
            writer,
            stores,
            keys,
            revocations,
            access,
            tls,
            join_token,
            ca_dir,
            max_watches_per_node,
            egress,
            insecure,
            oidc,
        } = deps;
        let invoker = Invoker::new(Arc::clone(&nodes), stores.shared_nodes.clone(), tls)
            .with_node_tokens(spear_identity::NodeTokens::new(join_token.clone()));
        let invoker = invoker.with_per_principal(keys.per_principal.clone());
        let delegations = keys.per_principal.clone();
        let broker = Arc::new(
            Broker::new(stores.vault, keys.oauth, Arc::clone(&hub))
                .with_per_principal(keys.per_principal)
                .with_network(oauth_network(egress)),
        );
        let events = TrustEvents::default();
        let heads = Arc::new(crate::audit::heads::Heads::default());
        let reports = Arc::new(Reports::new(
            Arc::clone(&nodes),
            stores.shared_nodes.clone(),
            Arc::clone(&heads),
            Arc::clone(&hub),
        ));
        let admin_audit = AdminAudit::new(Arc::clone(&stores.audit), events.clone());
        let quotas = crate::quotas::QuotaBook::new(
            stores.quotas,
            Arc::clone(&stores.tasks),
            Arc::clone(&hub),
        )
        .with_delegations(delegations);
        let audit = audit_service(&stores.audit, &events, &access, heads, &admin_audit);
        Services {
            quotas: Arc::new(QuotasService::new(Arc::new(quotas), access.clone())),
            registry: Arc::new(RegistryService::new(
                Arc::clone(&hub),
                Arc::clone(&reports),
                access.clone(),
                max_watches_per_node,
            )),
            pins: Arc::new(
                PinsService::new(
                    Arc::new(PinBook::default()),
                    events.clone(),
                    Arc::clone(&hub),
                    Arc::clone(&writer),
                    access.clone(),
                )
                .audited(admin_audit.clone()),
            ),
            approvals: Arc::new(
                ApprovalsService::new(
                    Arc::clone(&stores.approvals),
                    events.clone(),
                    access.clone(),
                )
                .for_live_nodes(Arc::clone(&nodes), stores.shared_nodes.clone())
                .audited(admin_audit.clone()),
            ),
            audit: Arc::new(audit),
            admin: Arc::new(
                AdminService::new(
                    Arc::new(Admin::new(writer, keys.sealer.clone())),
                    access.clone(),
                )
                .audited(admin_audit.clone()),
            ),
            tasks: Arc::new(
                TasksService::new(stores.tasks, Arc::new(invoker), access.clone())
                    .audited(admin_audit.clone())
                    .with_oidc(oidc),
            ),
            nodes: Arc::new(
                NodesService::new(reports, stores.shared_nodes, access.clone())
                    .with_tokens(spear_identity::NodeTokens::new(join_token.clone()), ca_dir)
                    .audited(admin_audit.clone()),
            ),
            credentials: Arc::new(
                CredentialsService::new(Arc::clone(&broker), keys.sealer, access.clone())
                    .audited(admin_audit.clone()),
            ),
            revocations: Arc::new(
                RevocationsService::new(revocations, access.clone()).audited(admin_audit),
            ),
            status: Arc::new(StatusService::new(hub, nodes, problems, access).insecure(insecure)),
            events,
            broker,
        }
    }

    /// The services the console calls in process.
    pub fn console_api(&self) -> crate::console::Api {
        crate::console::Api {
            registry: Arc::clone(&self.registry),
            status: Arc::clone(&self.status),
            tasks: Arc::clone(&self.tasks),
            pins: Arc::clone(&self.pins),
            approvals: Arc::clone(&self.approvals),
            audit: Arc::clone(&self.audit),
            credentials: Arc::clone(&self.credentials),
            events: self.events.clone(),
            broker: Arc::clone(&self.broker),
        }
    }

    /// Serves every service behind `access`'s gate, with its message sizes
    /// and deadlines and a health service, on `listener` until `shutdown`.
    pub async fn serve(
        self,
        access: &Access,
        listener: TcpListener,
        tls: Option<TlsIdentity>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), tonic::transport::Error> {
        let (health_reporter, health) = tonic_health::server::health_reporter();
        health_reporter
            .set_serving::<RegistryServer<RegistryService>>()
            .await;
        health_reporter
            .set_serving::<AdminServer<AdminService>>()
            .await;
        let deadlines = Deadlines::new(
            Duration::from_secs(30),
            &[
                ("/spear.v1.Tasks/InvokeTask", defaults::RUN_ANSWER_WITHIN),
                // Answers within crate::approvals::MAX_WAIT.
                ("/spear.v1.Approvals/AwaitApproval", Duration::from_secs(45)),
                (
                    "/spear.v1.Tasks/RegisterTask",
                    defaults::REGISTER_TASK_WITHIN,
                ),
                (
                    "/spear.v1.Credentials/GetAccessToken",
                    defaults::ACCESS_TOKEN_WITHIN,
                ),
            ],
        );
        spear_identity::server()
            .layer(access.gate().with_deadlines(deadlines))
            .add_service(health)
            .add_service(
                RegistryServer::from_arc(self.registry)
                    // A follow stream carries the node's reports.
                    .max_decoding_message_size(defaults::MAX_HEARTBEAT_BYTES),
            )
            .add_service(AdminServer::from_arc(self.admin).max_decoding_message_size(2 * MIB))
            .add_service(
                NodesServer::from_arc(self.nodes)
                    .max_decoding_message_size(defaults::MAX_HEARTBEAT_BYTES),
            )
            .add_service(PinsServer::from_arc(self.pins).max_decoding_message_size(8 * MIB))
            .add_service(
                ApprovalsServer::from_arc(self.approvals).max_decoding_message_size(256 * KIB),
            )
            .add_service(
                // A take carries a run's delegation, as a Credentials call does.
                QuotasServer::from_arc(self.quotas).max_decoding_message_size(128 * KIB),
            )
            .add_service(AuditServer::from_arc(self.audit).max_decoding_message_size(16 * MIB))
            .add_service(StatusServer::from_arc(self.status).max_decoding_message_size(4 * KIB))
            .add_service(
                CredentialsServer::from_arc(self.credentials).max_decoding_message_size(128 * KIB),
            )
            .add_service(
                RevocationsServer::from_arc(self.revocations).max_decoding_message_size(4 * KIB),
            )
            .add_service(
                TasksServer::from_arc(self.tasks)
                    .max_decoding_message_size(defaults::MAX_INVOKE_REQUEST_BYTES)
                    .max_encoding_message_size(defaults::MAX_INVOKE_RESPONSE_BYTES),
            )
            .serve_with_incoming_shutdown(incoming(listener, tls), shutdown)
            .await
    }
}

/// The Audit service: the trail, the heads nodes report, and admins'
/// resolutions recorded in SMS's own chain.
fn audit_service(
    store: &Arc<crate::audit::AuditStore>,
    events: &TrustEvents,
    access: &Access,
    heads: Arc<crate::audit::heads::Heads>,
    admin_audit: &AdminAudit,
) -> AuditService {
    AuditService::new(Arc::clone(store), events.clone(), access.clone())
        .with_heads(heads)
        .audited(admin_audit.clone())
}

/// Where SMS's OAuth flows may connect: public addresses, and the ranges
/// `--egress` lists (a protected server's metadata names the URLs).
fn oauth_network(egress: spear_egress::EgressPolicy) -> spear_oauth::Network {
    spear_oauth::Network::guarded(spear_egress::Egress::fixed(egress))
}
