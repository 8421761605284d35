//! Disputed seqs on the audit page: where SMS holds two or more copies of
//! one of a node's records (docs/trust.md, "Disputes"), each copy with
//! its SHA-256 and what it says, until an admin keeps one with
//! `sms audit resolve`.

use maud::{html, Markup};
use spear_proto::audit::Record;
use spear_proto::v1::QueryAuditResponse;

use super::badge;

/// One copy of a disputed record, as the page lists it.
pub struct Disputed {
    pub node: String,
    pub seq: u64,
    pub copy: u32,
    pub sha256: String,
    pub record: Record,
}

/// The copies of disputed seqs in `response`.
pub fn disputed(response: &QueryAuditResponse) -> Vec<Disputed> {
    let marks = response.copies.iter().zip(&response.sha256);
    response
        .records
        .iter()
        .zip(&response.nodes)
        .zip(marks)
        .filter(|(_, (_, sha))| !sha.is_empty())
        .map(|((line, node), (copy, sha))| Disputed {
            node: node.clone(),
            seq: line.seq,
            copy: *copy,
            sha256: sha.clone(),
            record: serde_json::from_str(&line.json).unwrap_or_default(),
        })
        .collect()
}

/// The section naming every disputed copy; nothing when there is none.
pub fn section(disputed: &[Disputed]) -> Markup {
    if disputed.is_empty() {
        return html! {};
    }
    html! {
        h2 { (badge("broken")) " Disputed records" }
        p { "Two or more copies were offered for these records under the node's name. Both are kept; the chain holds copy 0. Compare with " code { "spearlet audit-verify" } " on the node, then keep the true copy with " code { "sms audit resolve --node <node> --seq <seq> --keep <sha256>" } "." }
        table id="disputes" class="audit" {
            thead { tr { th { "Node" } th class="num" { "Seq" } th class="num" { "Copy" } th { "SHA-256" } th { "Outcome" } th { "Server · tool" } th { "Who · what" } } }
            tbody {
                @for d in disputed {
                    tr data-copy=(d.copy) {
                        td class="mono" { (d.node) }
                        td class="num" { (d.seq) }
                        td class="num" { (d.copy) @if d.copy == 0 { " (in the chain)" } }
                        td class="mono" { (d.sha256) }
                        td { (badge(d.record.outcome.name())) }
                        td class="mono" { (d.record.server) @if !d.record.tool.is_empty() { " · " (d.record.tool) } }
                        td { (d.record.identity) @if !d.record.action.is_empty() { " · " (d.record.action) " " (d.record.target) } }
                    }
                }
            }
        }
    }
}
