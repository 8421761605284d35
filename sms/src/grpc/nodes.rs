use std::sync::Arc;

use spear_identity::{Access, NodeTokens, TokenRefusal};
use spear_proto::v1::nodes_server::Nodes;
use spear_proto::v1::{
    HeartbeatRequest, HeartbeatResponse, JoinRequest, JoinResponse, MintJoinTokenRequest,
    MintJoinTokenResponse,
};
use tonic::{Request, Response, Status};

use tracing::warn;

use super::reports::Reports;
use crate::nodes::{NodeError, SharedNodes, SpentJoins, Via, NODE_TTL};

/// `spear.v1.Nodes`: node registration and heartbeats.
pub struct NodesService {
    /// Where heartbeats land (as reports on follow streams do).
    reports: Arc<Reports>,
    access: Access,
    /// Mints and checks join and node tokens (SMS's secret).
    tokens: NodeTokens,
    spent: SpentJoins,
    /// SMS's CA (`--ca-dir`): signs joining nodes' certificates on TLS.
    ca_dir: Option<std::path::PathBuf>,
    audit: crate::audit::AdminAudit,
}

/// How long a certificate a join gives lasts (as `sms certs issue`'s).
const NODE_CERT_DAYS: u32 = 365;

/// A join token's life when the admin names none.
const DEFAULT_JOIN_TTL_S: u64 = 3600;

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn refused(why: TokenRefusal) -> Status {
    match why {
        TokenRefusal::NoSecret => Status::failed_precondition(why.to_string()),
        TokenRefusal::BadId(_) | TokenRefusal::BadTtl => Status::invalid_argument(why.to_string()),
        TokenRefusal::OtherNode { .. } => Status::permission_denied(why.to_string()),
        _ => Status::unauthenticated(why.to_string()),
    }
}

impl NodesService {
    /// `shared` also spends join tokens for every SMS replica (etcd).
    pub fn new(reports: Arc<Reports>, shared: Option<Arc<SharedNodes>>, access: Access) -> Self {
        Self {
            reports,
            spent: SpentJoins::new(shared),
            access,
            tokens: NodeTokens::default(),
            ca_dir: None,
            audit: crate::audit::AdminAudit::default(),
        }
    }

    /// Records this service's admin writes (join tokens made) in the audit
    /// trail.
    pub fn audited(mut self, audit: crate::audit::AdminAudit) -> Self {
        self.audit = audit;
        self
    }

    /// Gives nodes their own tokens from SMS's secret and, with `ca_dir`,
    /// certificates from SMS's CA.
    pub fn with_tokens(mut self, tokens: NodeTokens, ca_dir: Option<std::path::PathBuf>) -> Self {
        self.tokens = tokens;
        self.ca_dir = ca_dir;
        self
    }
}

#[tonic::async_trait]
impl Nodes for NodesService {
    async fn join(&self, request: Request<JoinRequest>) -> Result<Response<JoinResponse>, Status> {
        let JoinRequest {
            node_id,
            join_token,
            csr_pem,
        } = request.into_inner();
        if !csr_pem.is_empty() && self.ca_dir.is_none() {
            return Err(Status::failed_precondition(
                "this SMS signs no certificates (it has no --ca-dir); issue the node's with `sms certs issue DIR --node ID`",
            ));
        }
        let now = now_unix();
        let claim = self
            .tokens
            .check_join(&join_token, &node_id, now)
            .map_err(|why| {
                warn!(node_id = %node_id, %why, "join refused");
                refused(why)
            })?;
        // The answer first, the token spent last: a request SMS cannot
        // sign leaves the token for a good one.
        let answer = match self.ca_dir.as_ref().filter(|_| !csr_pem.is_empty()) {
            Some(dir) => {
                let (certificate_pem, serial) =
                    crate::certs::sign_node(dir, &node_id, &csr_pem, NODE_CERT_DAYS).map_err(
                        |e| Status::invalid_argument(format!("{e}; the join token is unspent")),
                    )?;
                tracing::debug!(node_id = %node_id, %serial, "certificate signed for a join");
                JoinResponse {
                    node_token: String::new(),
                    certificate_pem,
                }
            }
            None => JoinResponse {
                node_token: self.tokens.node_token(&node_id).map_err(refused)?,
                certificate_pem: String::new(),
            },
        };
        let first = self
            .spent
            .spend(&claim, now)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        if !first {
            warn!(node_id = %node_id, "join refused: the token was used before");
            return Err(refused(TokenRefusal::Spent(node_id)));
        }
        tracing::info!(node_id = %node_id, certificate = !answer.certificate_pem.is_empty(), "node joined with its join token");
        Ok(Response::new(answer))
    }

    async fn mint_join_token(
        &self,
        request: Request<MintJoinTokenRequest>,
    ) -> Result<Response<MintJoinTokenResponse>, Status> {
        let caller = self.access.admin(&request, "mint_join_token")?;
        let MintJoinTokenRequest { node_id, ttl_s } = request.into_inner();
        let ttl_s = if ttl_s == 0 {
            DEFAULT_JOIN_TTL_S
        } else {
            ttl_s
        };
        let now = now_unix();
        let minted = self.tokens.mint_join(&node_id, ttl_s, now).map_err(refused);
        // Who let which node join is in SMS's own chain (never the token).
        self.audit
            .record(&caller, "mint_join_token", &node_id, &minted)
            .await;
        let join_token = minted?;
        tracing::info!(node_id = %node_id, %caller, ttl_s, "join token made");
        Ok(Response::new(MintJoinTokenResponse {
            join_token,
            expires_unix: now + ttl_s,
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let node_id = request.get_ref().node_id.clone();
        self.access.node(&request, &node_id, "heartbeat")?;
        self.reports
            .take(request.into_inner(), Via::Heartbeat)
            .map_err(refused_report)?;
        Ok(Response::new(HeartbeatResponse {
            ttl_ms: NODE_TTL.as_millis() as u32,
        }))
    }
}

/// A report SMS did not take, as a gRPC status.
pub(super) fn refused_report(e: NodeError) -> Status {
    match e {
        NodeError::TooFrequent(_) | NodeError::TooMany => Status::resource_exhausted(e.to_string()),
        NodeError::EmptyId | NodeError::BadId(_) => Status::invalid_argument(e.to_string()),
    }
}
