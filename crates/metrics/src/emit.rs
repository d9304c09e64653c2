//! One-line helpers for collectors: a metric's descriptor and its samples, with labels as
//! `(name, value)` pairs. Counter names are given without `_total`: the encoder adds it.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use crate::Histogram;

/// A label set: `[("type", "PUT"), ("status", "SUCCESS")]`.
pub type Labels<'a> = Vec<(&'static str, &'a str)>;

pub fn counter(e: &mut DescriptorEncoder<'_>, name: &str, help: &str, value: u64) -> fmt::Result {
    let c = ConstCounter::new(value);
    c.encode(e.encode_descriptor(name, help, None, c.metric_type())?)
}

pub fn gauge(e: &mut DescriptorEncoder<'_>, name: &str, help: &str, value: f64) -> fmt::Result {
    let g = ConstGauge::new(value);
    g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
}

/// A counter with one sample per label set.
pub fn counters<'l>(e: &mut DescriptorEncoder<'_>, name: &str, help: &str, rows: impl IntoIterator<Item = (Labels<'l>, u64)>) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in rows {
        ConstCounter::new(value).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A gauge with one sample per label set.
pub fn gauges<'l>(e: &mut DescriptorEncoder<'_>, name: &str, help: &str, rows: impl IntoIterator<Item = (Labels<'l>, f64)>) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        ConstGauge::new(value).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A histogram with one series per label set (an empty set for a single series).
pub fn histograms<'l, 'h>(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels<'l>, &'h Histogram)>,
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in rows {
        let (sum, count, buckets) = h.snapshot();
        if labels.is_empty() {
            m.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        } else {
            m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        }
    }
    Ok(())
}
