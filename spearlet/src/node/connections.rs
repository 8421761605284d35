//! The node's MCP connections, built with what the node policy lets server
//! files use: only the variables it allows, HTTP servers only where its
//! egress rules reach, and OAuth tokens and sealed values from SMS.

use std::sync::Arc;

use crate::connections::{Connections, Lookup};
use crate::mcp::SessionOptions;
use crate::node_policy::PolicyCell;
use crate::registry::RegistryHandle;
use crate::sms_link::SmsLink;
use crate::sms_tokens::SmsCredentials;

pub fn build(registry: &RegistryHandle, policy: &PolicyCell, sms: &SmsLink) -> Connections {
    let env = policy.clone();
    let lookup: Lookup = Arc::new(move |name: &str| env.current().env.lookup(name));
    let egress = policy.egress();
    let guarded = crate::http_client::guarded_http_client(&egress);
    let options = SessionOptions {
        credentials: Some(Arc::new(SmsCredentials::new(sms.clone()))),
        egress: Some((egress, guarded)),
        ..SessionOptions::default()
    };
    Connections::with_options(registry.clone(), lookup, options)
}
