//! What a call's binding must hold: the fields a request needs, arguments that hash to the
//! digest it binds, and the first field in which a claim differs from what was approved.

use spear_proto::v1::ApprovalBinding;

use super::{ApprovalError, MAX_ARGUMENTS};

/// Whether the arguments an operator will read are the ones the digest
/// binds. Where the node replaced a secret of the server's (the marker
/// [`REDACTED`](spear_proto::refs::REDACTED)), SMS never sees the value and
/// cannot hash it; the page says the shown arguments are redacted there.
fn shown_is_bound(shown: &str, digest: &str) -> bool {
    let hashed = spear_proto::approvals::arguments_digest(shown).unwrap_or_else(|| {
        spear_proto::pins::digest(&serde_json::Value::String(shown.to_string()))
    });
    hashed == digest || shown.contains(spear_proto::refs::REDACTED)
}

/// A request's required fields, and arguments that are what it binds.
pub(super) fn check_request(
    binding: &ApprovalBinding,
    arguments: &str,
) -> Result<(), ApprovalError> {
    for (field, value) in [
        ("node", &binding.node_id),
        ("server", &binding.server_id),
        ("tool", &binding.tool),
        ("invocation", &binding.invocation_id),
        ("arguments digest", &binding.arguments_digest),
    ] {
        if value.is_empty() {
            return Err(ApprovalError::Missing(field));
        }
    }
    if arguments.len() > MAX_ARGUMENTS {
        return Err(ApprovalError::LargeArguments(arguments.len()));
    }
    if !shown_is_bound(arguments, &binding.arguments_digest) {
        return Err(ApprovalError::ShownNotBound);
    }
    Ok(())
}

/// The first field in which the call `binding` differs from the one
/// `approved`, if any.
pub(super) fn differing_field(
    approved: &ApprovalBinding,
    binding: &ApprovalBinding,
) -> Option<&'static str> {
    let fields: [(&'static str, &str, &str); 8] = [
        ("task", &approved.task_id, &binding.task_id),
        (
            "invocation",
            &approved.invocation_id,
            &binding.invocation_id,
        ),
        ("identity", &approved.identity, &binding.identity),
        ("server", &approved.server_id, &binding.server_id),
        ("tool", &approved.tool, &binding.tool),
        (
            "arguments",
            &approved.arguments_digest,
            &binding.arguments_digest,
        ),
        (
            "tool definition (pin)",
            &approved.pin_digest,
            &binding.pin_digest,
        ),
        ("node", &approved.node_id, &binding.node_id),
    ];
    if let Some((field, _, _)) = fields.iter().find(|(_, a, b)| a != b) {
        return Some(field);
    }
    (approved.policy_revision != binding.policy_revision).then_some("policy revision")
}
