//! Which listed tools a node may offer under its server's pin
//! (docs/trust.md).
//!
//! A server's record carries the pinned digest of each tool's definition.
//! The node digests what the server lists now and offers a tool only when
//! its digest is the pinned one: a tool whose definition changed since an
//! operator (or the first sight) vetted it, or a tool the pin does not
//! know, is held, and calls to it are refused, whichever path they take.
//! The node reports what it sees to SMS, which answers with the pins (on
//! first sight, the ones it just made) and shows the rest to operators.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::Tool;
use spear_proto::audit::{Kind, Outcome, Record};
use spear_proto::pins::{definition, digest, PinMode};
use spear_proto::v1::{SeenTool, ServerSpec, ToolPins};
use tracing::warn;

use crate::env_refs::Redactor;
use crate::registry::RegistryHandle;
use crate::trust::audit::AuditLog;

/// Sends what a server lists to SMS; answers the server's pins after it.
pub type Reporter = Arc<
    dyn Fn(
            String,
            Vec<SeenTool>,
        ) -> Pin<Box<dyn Future<Output = Result<Option<ToolPins>, ReportFailed>> + Send>>
        + Send
        + Sync,
>;

/// SMS did not take a report.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot report the server's tool definitions to SMS: {0}")]
pub struct ReportFailed(pub String);

/// How long a listing waits for SMS to answer a report.
const REPORT_WITHIN: Duration = Duration::from_secs(3);

/// Where a slot finds its server's pins, and whom it tells what it sees.
#[derive(Clone)]
pub(super) struct Pinning {
    pub registry: RegistryHandle,
    /// `None` off a running node (`spearlet mcp`): the registry's pins
    /// still hold, but nothing is reported.
    pub reporter: Option<Reporter>,
    /// Where pin decisions are recorded (a running node).
    pub audit: Option<AuditLog>,
    /// The last report SMS took for this server: what was seen, against
    /// which pins, and SMS's answer. A re-list (every `timeouts_ms.relist`)
    /// that sees the same sends nothing: SMS already knows it.
    pub last_report: Arc<parking_lot::Mutex<Option<Reported>>>,
}

/// What one report said and what SMS answered.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Reported {
    seen: Vec<(String, String)>,
    pins: Option<ToolPins>,
    answered: Option<ToolPins>,
}

impl Pinning {
    /// Records what a new listing of `server` decided against the one
    /// before: a tool newly held (drift), and a held one now offered (its
    /// new definition pinned). `before` is the held tools, with why.
    pub fn audit_changes(
        &self,
        server: &str,
        before: &BTreeMap<String, String>,
        held: &BTreeMap<String, Held>,
        offered: &[Tool],
    ) {
        let Some(log) = &self.audit else {
            return;
        };
        let record = |tool: &str, outcome: Outcome, rule: String, pin: String| Record {
            kind: Kind::Pin,
            outcome,
            server: server.to_string(),
            tool: tool.to_string(),
            rule,
            pin,
            ..Record::default()
        };
        for (tool, why) in held.iter().filter(|(tool, _)| !before.contains_key(*tool)) {
            let seen = match why {
                Held::Changed { seen, .. } => seen.clone(),
                _ => String::new(),
            };
            log.append(record(
                tool,
                Outcome::Drift,
                why.sentence(server, tool),
                seen,
            ));
        }
        let pins = self.current(server);
        for tool in offered
            .iter()
            .filter(|t| before.contains_key(t.name.as_ref()))
        {
            let pin = pins
                .as_ref()
                .and_then(|p| p.tools.get(tool.name.as_ref()).cloned())
                .unwrap_or_default();
            let rule =
                "its definition is the pinned one again (an operator approved it)".to_string();
            log.append(record(&tool.name, Outcome::Pinned, rule, pin));
        }
    }

    /// `server`'s pins as the registry holds them now.
    pub fn current(&self, server: &str) -> Option<ToolPins> {
        let view = self.registry.current();
        view.servers.get(server).and_then(|r| r.pins.clone())
    }

    /// Whether `server`'s pins in the registry are no longer `pins` (an
    /// approval since), compared in place: this runs on every call. No
    /// pins then and some now is a change too: an `approve` server listed
    /// before its first approval (everything held) must see it.
    pub fn moved(&self, server: &str, pins: Option<&ToolPins>) -> bool {
        let view = self.registry.current();
        let now = view.servers.get(server).and_then(|r| r.pins.as_ref());
        pins != now
    }

    /// Tells SMS what `spec`'s server lists (definitions only where they
    /// are not the pinned ones, the server's secrets redacted) and returns
    /// the pins after it: `pins` (the registry's), else the ones SMS just
    /// made from this first sight.
    pub async fn report(
        &self,
        spec: &ServerSpec,
        secrets: &Redactor,
        seen: &[SeenTool],
        pins: Option<ToolPins>,
    ) -> Option<ToolPins> {
        let Some(reporter) = &self.reporter else {
            return pins;
        };
        if PinMode::of(&spec.pin) == PinMode::Off {
            return pins;
        }
        let said: Vec<(String, String)> = seen
            .iter()
            .map(|t| (t.name.clone(), t.digest.clone()))
            .collect();
        if let Some(last) = self.last_report.lock().as_ref() {
            if last.seen == said && last.pins == pins {
                return pins.or_else(|| last.answered.clone());
            }
        }
        let sent: Vec<SeenTool> = seen
            .iter()
            .map(|tool| {
                let pinned = pins
                    .as_ref()
                    .and_then(|p| p.tools.get(&tool.name))
                    .is_some_and(|d| *d == tool.digest);
                // Never a secret of the server's to SMS in clear, even
                // one the server put in a description.
                let definition = match pinned {
                    true => Cow::Borrowed(""),
                    false => secrets.redact(&tool.definition),
                };
                SeenTool {
                    redacted: matches!(definition, Cow::Owned(_)),
                    definition: definition.into_owned(),
                    ..tool.clone()
                }
            })
            .collect();
        let report = reporter(spec.id.clone(), sent);
        match tokio::time::timeout(REPORT_WITHIN, report).await {
            Ok(Ok(answered)) => {
                *self.last_report.lock() = Some(Reported {
                    seen: said,
                    pins: pins.clone(),
                    answered: answered.clone(),
                });
                pins.or(answered)
            }
            Ok(Err(error)) => {
                warn!(server_id = %spec.id, %error, "tool definitions not reported; pins as the registry has them");
                pins
            }
            Err(_) => {
                warn!(server_id = %spec.id, "SMS did not answer the tool report within {REPORT_WITHIN:?}; pins as the registry has them");
                pins
            }
        }
    }
}

/// One listed tool and its definition's digest.
pub fn seen(tool: &Tool) -> SeenTool {
    let listed = serde_json::to_value(tool).unwrap_or_default();
    let definition = definition(&listed);
    SeenTool {
        name: tool.name.to_string(),
        digest: digest(&definition),
        definition: definition.to_string(),
        redacted: false,
    }
}

/// Why a listed tool is not offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Its definition is not the one pinned.
    Changed { pinned: String, seen: String },
    /// The pin does not know it: it appeared since the server was pinned.
    New,
    /// The server pins with "approve" and nothing is approved yet.
    AwaitingApproval,
}

impl Held {
    /// The sentence a refused call gives: what, and the command to see it.
    pub fn sentence(&self, server: &str, tool: &str) -> String {
        match self {
            Held::Changed { pinned, seen } => format!(
                "tool '{tool}' of server '{server}' changed since it was pinned (definition {} now, {} pinned) and is not offered until an operator approves it: see `sms pins diff {server} {tool}`, then `sms pins approve {server} {tool}`",
                short(seen),
                short(pinned)
            ),
            Held::New => format!(
                "tool '{tool}' of server '{server}' appeared after the server's tools were pinned and is not offered until an operator approves it: see `sms pins diff {server} {tool}`, then `sms pins approve {server} {tool}`"
            ),
            Held::AwaitingApproval => format!(
                "server '{server}' pins its tools with \"approve\" and no operator has approved tool '{tool}' yet: see `sms pins diff {server}`, then `sms pins approve {server}`"
            ),
        }
    }
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// Whether a tool with `digest` may be offered under `mode` and `pins`.
pub fn verdict(
    mode: PinMode,
    pins: Option<&ToolPins>,
    tool: &str,
    digest: &str,
) -> Result<(), Held> {
    match (mode, pins) {
        (PinMode::Off, _) => Ok(()),
        (_, Some(pins)) => match pins.tools.get(tool) {
            Some(pinned) if pinned == digest => Ok(()),
            Some(pinned) => Err(Held::Changed {
                pinned: pinned.clone(),
                seen: digest.to_string(),
            }),
            None => Err(Held::New),
        },
        // Not pinned yet: this sight is the first, and becomes the pin.
        (PinMode::FirstSeen, None) => Ok(()),
        (PinMode::Approve, None) => Err(Held::AwaitingApproval),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins(tools: &[(&str, &str)]) -> ToolPins {
        ToolPins {
            tools: tools
                .iter()
                .map(|(n, d)| (n.to_string(), d.to_string()))
                .collect(),
        }
    }

    /// A re-list that sees what the last report said sends nothing; a
    /// change, or other pins, is reported again.
    #[tokio::test]
    async fn an_unchanged_listing_is_not_reported_again() {
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&sent);
        let reporter: Reporter = Arc::new(move |_, _| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Ok(Some(pins(&[("echo", "d1")]))) })
        });
        let pinning = Pinning {
            registry: RegistryHandle::new(crate::registry::RegistryView::default()),
            reporter: Some(reporter),
            audit: None,
            last_report: Arc::default(),
        };
        let spec = ServerSpec {
            id: "s".into(),
            pin: "first-seen".into(),
            ..ServerSpec::default()
        };
        let seen = |digest: &str| {
            vec![SeenTool {
                name: "echo".into(),
                digest: digest.into(),
                ..SeenTool::default()
            }]
        };
        let secrets = Redactor::default();
        let count = || sent.load(std::sync::atomic::Ordering::SeqCst);
        let first = pinning.report(&spec, &secrets, &seen("d1"), None).await;
        assert_eq!(first, Some(pins(&[("echo", "d1")])));
        let again = pinning.report(&spec, &secrets, &seen("d1"), None).await;
        assert_eq!((again, count()), (first.clone(), 1));
        pinning.report(&spec, &secrets, &seen("d2"), None).await;
        assert_eq!(count(), 2);
        pinning.report(&spec, &secrets, &seen("d2"), first).await;
        assert_eq!(count(), 3);
    }

    #[test]
    fn only_the_pinned_definition_of_a_known_tool_is_offered() {
        let pinned = pins(&[("echo", "aaa")]);
        for mode in [PinMode::FirstSeen, PinMode::Approve] {
            assert_eq!(verdict(mode, Some(&pinned), "echo", "aaa"), Ok(()));
            assert_eq!(
                verdict(mode, Some(&pinned), "echo", "bbb"),
                Err(Held::Changed {
                    pinned: "aaa".into(),
                    seen: "bbb".into()
                })
            );
            assert_eq!(
                verdict(mode, Some(&pinned), "exfiltrate", "ccc"),
                Err(Held::New)
            );
        }
        assert_eq!(verdict(PinMode::Off, Some(&pinned), "echo", "bbb"), Ok(()));
    }

    #[test]
    fn before_any_pin_first_seen_offers_and_approve_holds() {
        assert_eq!(verdict(PinMode::FirstSeen, None, "echo", "aaa"), Ok(()));
        assert_eq!(
            verdict(PinMode::Approve, None, "echo", "aaa"),
            Err(Held::AwaitingApproval)
        );
    }

    #[test]
    fn a_refusal_names_server_tool_and_the_command_that_shows_the_change() {
        let held = Held::Changed {
            pinned: "0123456789abcdef".into(),
            seen: "fedcba9876543210".into(),
        };
        let sentence = held.sentence("drifty", "echo");
        assert!(
            sentence.contains("tool 'echo' of server 'drifty' changed"),
            "{sentence}"
        );
        assert!(
            sentence.contains("`sms pins diff drifty echo`"),
            "{sentence}"
        );
        assert!(
            sentence.contains("fedcba987654 now, 0123456789ab pinned"),
            "{sentence}"
        );
    }

    #[test]
    fn a_schema_change_changes_what_is_seen() {
        let tool: Tool = serde_json::from_value(serde_json::json!({
            "name": "echo", "description": "Echo", "inputSchema": {"type": "object"}
        }))
        .unwrap();
        let mut changed = tool.clone();
        let schema: rmcp::model::JsonObject = serde_json::from_value(serde_json::json!({
            "type": "object", "properties": {"to": {"type": "string"}}
        }))
        .unwrap();
        changed.input_schema = Arc::new(schema);
        assert_ne!(seen(&tool).digest, seen(&changed).digest);
        assert_eq!(seen(&tool).digest, seen(&tool.clone()).digest);
    }
}
