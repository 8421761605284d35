//! Audit records as OpenTelemetry logs over OTLP (HTTP/protobuf): SMS
//! exports each record new to it, so a fleet's trail reaches the
//! operator's log pipeline once, from one place. Off unless configured
//! with the standard variables: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`); `OTEL_SDK_DISABLED=true` or
//! `OTEL_LOGS_EXPORTER=none` turns it off. Entry point: [`export`].
//!
//! A record's body is its JSON line exactly as the node wrote it (so a
//! log pipeline can verify its hash); its node, seq, kind and outcome are
//! attributes to filter on. Records hold no secrets (docs/trust.md).

use std::sync::OnceLock;

use opentelemetry::logs::{AnyValue, LogRecord, Logger, LoggerProvider, Severity};
use opentelemetry_sdk::logs::{SdkLogger, SdkLoggerProvider};
use opentelemetry_sdk::Resource;

static LOGGER: OnceLock<Option<(SdkLoggerProvider, SdkLogger)>> = OnceLock::new();

/// Whether the environment asks for logs, with the variables from `var`.
fn configured_by(var: &dyn Fn(&str) -> Option<String>) -> bool {
    crate::telemetry::signal_configured(var, "LOGS")
}

fn build() -> Option<(SdkLoggerProvider, SdkLogger)> {
    if !configured_by(&|name| std::env::var(name).ok()) {
        return None;
    }
    let exporter = match opentelemetry_otlp::LogExporter::builder()
        .with_http()
        .build()
    {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("audit logs are not exported: the OTLP exporter could not be built from OTEL_* ({error})");
            return None;
        }
    };
    let resource = Resource::builder()
        .with_service_name(std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "sms".into()))
        .build();
    let provider = SdkLoggerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let logger = provider.logger("spear.audit");
    Some((provider, logger))
}

/// What a log pipeline filters a record on.
pub struct Labels<'a> {
    pub node: &'a str,
    pub seq: u64,
    pub kind: &'a str,
    pub outcome: &'a str,
}

/// Whether records are exported (logs configured and the exporter built).
pub fn enabled() -> bool {
    LOGGER.get_or_init(build).is_some()
}

/// Exports one audit record (its JSON line), when logs are configured.
pub fn export(labels: Labels<'_>, json: &str) {
    let Some((_, logger)) = LOGGER.get_or_init(build) else {
        return;
    };
    let mut record = logger.create_log_record();
    record.set_severity_number(Severity::Info);
    record.set_severity_text("INFO");
    record.set_event_name("spear.audit");
    record.set_body(AnyValue::from(json.to_string()));
    record.add_attribute("spear.node_id", labels.node.to_string());
    record.add_attribute("spear.audit.seq", labels.seq as i64);
    record.add_attribute("spear.audit.kind", labels.kind.to_string());
    record.add_attribute("spear.audit.outcome", labels.outcome.to_string());
    logger.emit(record);
}

/// Flushes the records not yet exported; call once, before exit.
pub fn shutdown() {
    if let Some(Some((provider, _))) = LOGGER.get() {
        let _ = provider.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::configured_by;

    #[test]
    fn logs_follow_their_own_endpoint_and_exporter_variables() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(!configured_by(&vars(&[])));
        assert!(configured_by(&vars(&[(
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
            "http://c:4318/v1/logs"
        )])));
        assert!(!configured_by(&vars(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://c:4318"
        )])));
        assert!(!configured_by(&vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_LOGS_EXPORTER", "none"),
        ])));
    }
}
