//! OpenTelemetry traces over OTLP (HTTP/protobuf), off unless configured
//! with the standard variables: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns them on; the exporter reads
//! the rest (`OTEL_EXPORTER_OTLP_HEADERS`, `_TIMEOUT`, `OTEL_BSP_*`,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`); `OTEL_SDK_DISABLED=true`
//! or `OTEL_TRACES_EXPORTER=none` turns them off again.
//!
//! Entry point: [`layer`], added to the logging subscriber by
//! [`crate::init_logging`]: Spear's own `tracing` spans (not its
//! libraries') become OpenTelemetry spans. [`traceparent`] and
//! [`set_parent`] carry the W3C trace context across SMS, nodes, model
//! providers and MCP servers; [`shutdown`] flushes before exit. Spans are
//! exported without log events, so nothing the log redacts leaves by them.

use std::collections::HashMap;
use std::sync::OnceLock;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{filter_fn, FilterExt, Targets};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The crates whose spans are exported: Spear's, not its libraries'.
const TRACED: &[&str] = &["spearlet", "spear_sms", "spear_common"];

/// Whether the environment asks for traces.
pub fn configured() -> bool {
    configured_by(&|name| std::env::var(name).ok())
}

/// [`configured`], with the variables from `var`.
fn configured_by(var: &dyn Fn(&str) -> Option<String>) -> bool {
    signal_configured(var, "TRACES")
}

/// Whether the standard variables ask for OTLP `signal` (`TRACES`,
/// `LOGS`): an endpoint for all signals or for this one, and neither the
/// SDK nor this signal's exporter turned off.
pub(crate) fn signal_configured(var: &dyn Fn(&str) -> Option<String>, signal: &str) -> bool {
    let set = |name: &str| var(name).is_some_and(|v| !v.trim().is_empty());
    let is =
        |name: &str, value: &str| var(name).is_some_and(|v| v.trim().eq_ignore_ascii_case(value));
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")))
        && !is("OTEL_SDK_DISABLED", "true")
        && !is(&format!("OTEL_{signal}_EXPORTER"), "none")
}

/// The layer exporting Spear's spans, when traces are configured. A
/// configuration the exporter refuses is said once on stderr and leaves
/// traces off (logging still works).
pub fn layer<S>(service: &str) -> Option<impl Layer<S>>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    if !configured() {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("traces are off: the OTLP exporter could not be built from OTEL_* ({error})");
            return None;
        }
    };
    let resource = Resource::builder()
        .with_service_name(
            std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| service.to_string()),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let tracer = provider.tracer("spear");
    let _ = PROVIDER.set(provider);
    let targets = TRACED.iter().fold(Targets::new(), |t, target| {
        t.with_target(*target, tracing::Level::INFO)
    });
    // Spans only: log events would become span events, and their text is
    // what the node redacts only as it writes its log lines.
    let spans_only = filter_fn(|metadata| metadata.is_span());
    Some(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(targets.and(spans_only)),
    )
}

/// Flushes the spans not yet exported; call once, before exit.
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.shutdown();
    }
}

/// The W3C `traceparent` of the current span, to send with a request;
/// `None` when traces are off.
pub fn traceparent() -> Option<String> {
    PROVIDER.get()?;
    let mut fields = HashMap::new();
    let context = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut fields);
    fields.remove("traceparent")
}

/// Makes `span` a child of the trace named by `traceparent` (a request's
/// header or `_meta`), if it names one.
pub fn set_parent(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(traceparent) = traceparent else {
        return;
    };
    if PROVIDER.get().is_none() {
        return;
    }
    let fields = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    let context = TraceContextPropagator::new().extract(&fields);
    let _ = span.set_parent(context);
}

#[cfg(test)]
mod tests {
    use super::configured_by;

    fn with(vars: &[(&str, &str)]) -> bool {
        configured_by(&|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn traces_are_on_only_with_an_endpoint_and_not_disabled() {
        assert!(!with(&[]));
        assert!(!with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]));
        assert!(with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]));
        assert!(with(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://c:4318/v1/traces"
        )]));
        let disabled = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ];
        assert!(!with(&disabled));
        let none = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ];
        assert!(!with(&none));
        // No exporter in this process: nothing to pass on.
        assert_eq!(super::traceparent(), None);
    }
}
