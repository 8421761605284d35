//! The node's MCP connections, built with what the node policy lets server
//! files use: only the variables it allows, HTTP servers only where its
//! egress rules reach, and OAuth tokens and sealed values from SMS.

use std::sync::Arc;

use crate::connections::{Connections, Lookup, ReportFailed, Reporter};
use crate::mcp::SessionOptions;
use crate::node_policy::PolicyCell;
use crate::registry::RegistryHandle;
use crate::sandbox::Sandboxing;
use crate::sms_link::SmsLink;
use crate::sms_tokens::SmsCredentials;
use crate::trust::audit::AuditLog;

pub fn build(
    registry: &RegistryHandle,
    policy: &PolicyCell,
    sms: &SmsLink,
    node_id: &str,
    audit: &AuditLog,
    config: &super::NodeConfig,
) -> Connections {
    let env = policy.clone();
    let lookup: Lookup = Arc::new(move |name: &str| env.current().env.lookup(name));
    let egress = policy.egress();
    let guarded = crate::http_client::guarded_http_client(&egress);
    // Every stdio server in its sandbox: this binary is the launcher.
    let own = crate::sandbox::own_paths(
        Some(&config.state_dir),
        config.config_path.as_deref(),
        &std::env::args_os().collect::<Vec<_>>(),
    );
    let sandbox = Sandboxing::new(own, policy.sandbox(), Some(egress.clone()));
    let options = SessionOptions {
        credentials: Some(Arc::new(SmsCredentials::new(sms.clone()))),
        egress: Some((egress, guarded)),
        sandbox: Some(sandbox),
        ..SessionOptions::default()
    };
    Connections::reporting(
        registry.clone(),
        lookup,
        options,
        Some(reporter(sms.clone(), node_id.to_string())),
        Some(audit.clone()),
    )
}

/// Reports what a server lists to the SMS the node follows.
fn reporter(sms: SmsLink, node_id: String) -> Reporter {
    Arc::new(move |server_id, tools| {
        let (sms, node_id) = (sms.clone(), node_id.clone());
        Box::pin(async move {
            let mut pins = sms.pins().map_err(|e| ReportFailed(e.to_string()))?;
            let request = spear_proto::v1::ReportToolsRequest {
                node_id,
                server_id,
                tools,
            };
            let answer = pins
                .report_tools(request)
                .await
                .map_err(|status| ReportFailed(status.message().to_string()))?;
            Ok(answer.into_inner().pins)
        })
    })
}
