//! Metrics exposition for both binaries, on `prometheus-client` (the
//! OpenMetrics text format).
//!
//! Entry point: [`render`]. Each binary's values live in its own atomics and
//! tables and are read at scrape time, so a binary writes one [`Scrape`]
//! function naming each metric once; this module turns it into a
//! `prometheus-client` collector. Label values are escaped here (the
//! library writes them as given), so an id with a quote or a newline cannot
//! break the exposition.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::exponential_buckets;
pub use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The metrics of one scrape, written through [`Scrape`].
pub type ScrapeFn = dyn Fn(&mut Scrape<'_>) -> fmt::Result + Send + Sync;

/// Renders the metrics `scrape` writes, in the OpenMetrics text format.
pub fn render(scrape: impl Fn(&mut Scrape<'_>) -> fmt::Result + Send + Sync + 'static) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Collect(Box::new(scrape))));
    let mut out = String::new();
    if let Err(error) = prometheus_client::encoding::text::encode(&mut out, &registry) {
        tracing::warn!(%error, "the metrics could not be encoded");
    }
    out
}

struct Collect(Box<ScrapeFn>);

impl fmt::Debug for Collect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Collect")
    }
}

impl Collector for Collect {
    fn encode(&self, encoder: DescriptorEncoder<'_>) -> fmt::Result {
        (self.0)(&mut Scrape { encoder })
    }
}

/// Writes metrics during one scrape. Counter names are given without
/// `_total`; the format adds it.
pub struct Scrape<'a> {
    encoder: DescriptorEncoder<'a>,
}

/// One row of a labelled family: label pairs and the value.
pub type Row<'l, V> = (Vec<(&'static str, &'l str)>, V);

impl Scrape<'_> {
    pub fn gauge(&mut self, name: &str, help: &str, value: i64) -> fmt::Result {
        let gauge = ConstGauge::new(value);
        gauge.encode(
            self.encoder
                .encode_descriptor(name, help, None, gauge.metric_type())?,
        )
    }

    pub fn counter(&mut self, name: &str, help: &str, value: u64) -> fmt::Result {
        let counter = ConstCounter::new(value);
        counter.encode(
            self.encoder
                .encode_descriptor(name, help, None, counter.metric_type())?,
        )
    }

    /// A gauge with one row per label set.
    pub fn gauges<'l>(
        &mut self,
        name: &str,
        help: &str,
        rows: impl IntoIterator<Item = Row<'l, i64>>,
    ) -> fmt::Result {
        let kind = ConstGauge::new(0i64).metric_type();
        let mut family = self.encoder.encode_descriptor(name, help, None, kind)?;
        for (labels, value) in rows {
            let labels: Vec<(&str, Escaped<'_>)> =
                labels.iter().map(|(k, v)| (*k, Escaped(v))).collect();
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }

    pub fn histogram(&mut self, name: &str, help: &str, histogram: &Histogram) -> fmt::Result {
        histogram.encode(self.encoder.encode_descriptor(
            name,
            help,
            None,
            histogram.metric_type(),
        )?)
    }

    /// A histogram with one row per label set.
    pub fn histograms<'l>(
        &mut self,
        name: &str,
        help: &str,
        rows: impl IntoIterator<Item = Row<'l, &'l Histogram>>,
    ) -> fmt::Result {
        let kind = prometheus_client::metrics::MetricType::Histogram;
        let mut family = self.encoder.encode_descriptor(name, help, None, kind)?;
        for (labels, histogram) in rows {
            let labels: Vec<(&str, Escaped<'_>)> =
                labels.iter().map(|(k, v)| (*k, Escaped(v))).collect();
            histogram.encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// A counter with one row per label set (integer or seconds).
    pub fn counters<'l, V: CounterValue>(
        &mut self,
        name: &str,
        help: &str,
        rows: impl IntoIterator<Item = Row<'l, V>>,
    ) -> fmt::Result {
        let kind = ConstCounter::new(0u64).metric_type();
        let mut family = self.encoder.encode_descriptor(name, help, None, kind)?;
        for (labels, value) in rows {
            let labels: Vec<(&str, Escaped<'_>)> =
                labels.iter().map(|(k, v)| (*k, Escaped(v))).collect();
            value.encode_counter(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// A histogram of durations in seconds, from 1 ms to about 2 minutes
/// (doubling buckets): tool calls, model requests, guest runs.
pub fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 18))
}

/// A counter's value: a count or a float (seconds).
pub trait CounterValue {
    fn encode_counter(self, encoder: prometheus_client::encoding::MetricEncoder<'_>)
        -> fmt::Result;
}

impl CounterValue for u64 {
    fn encode_counter(
        self,
        encoder: prometheus_client::encoding::MetricEncoder<'_>,
    ) -> fmt::Result {
        ConstCounter::new(self).encode(encoder)
    }
}

impl CounterValue for f64 {
    fn encode_counter(
        self,
        encoder: prometheus_client::encoding::MetricEncoder<'_>,
    ) -> fmt::Result {
        ConstCounter::new(self).encode(encoder)
    }
}

/// A label value escaped as the text format requires (`\\`, `\"`, `\n`).
struct Escaped<'a>(&'a str);

impl EncodeLabelValue for Escaped<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> fmt::Result {
        use fmt::Write;
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_render_with_escaped_labels_and_counters_end_in_total() {
        let text = render(|s| {
            s.gauge("up_things", "Things up.", 3)?;
            s.counter("sent", "Sent.", 7)?;
            s.gauges("lag", "Lag per node.", [(vec![("node", "a\"b\\c\nd")], 2)])?;
            s.counters("seconds", "Time.", [(vec![("server", "fs")], 1.5)])
        });
        assert!(text.contains("up_things 3\n"), "{text}");
        assert!(
            text.contains("# TYPE sent counter\nsent_total 7\n"),
            "{text}"
        );
        assert!(text.contains(r#"lag{node="a\"b\\c\nd"} 2"#), "{text}");
        assert!(text.contains(r#"seconds_total{server="fs"} 1.5"#), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn histograms_render_with_and_without_labels() {
        let text = render(|m| {
            let h = seconds_histogram();
            h.observe(0.003);
            m.histogram("unlabelled_seconds", "Unlabelled.", &h)?;
            m.histograms(
                "labelled_seconds",
                "Labelled.",
                [(vec![("server", "a\"b")], &h)],
            )
        });
        assert!(text.contains("unlabelled_seconds_count 1"), "{text}");
        assert!(
            text.contains("labelled_seconds_count{server=\"a\\\"b\"} 1"),
            "{text}"
        );
    }
}
