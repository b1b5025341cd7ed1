//! The OpenMetrics 1.0 text exposition of the gathered families, with the latest exemplar of
//! each counter series, and the `Accept` negotiation that picks it or the 0.0.4 text format
//! for `/metrics`. The 0.0.4 format stays `prometheus::TextEncoder`'s (`Registry::encode`);
//! the registry, the families and the exemplar store are the parent module's.

use std::collections::HashMap;
use std::fmt::Write;
use std::hash::BuildHasher;
use std::time::UNIX_EPOCH;

use foldhash::fast::FixedState;

use prometheus::proto::{LabelPair, Metric, MetricFamily, MetricType};

use super::exemplars::{Exemplar, Exemplars, MAX_LABEL_CHARS};

/// A series' label pairs (sorted by name) and its exemplar.
type Traced<'a> = (&'a [(String, String)], &'a Exemplar);
/// The exemplars of a scrape by family name.
type ByFamily<'a> = HashMap<&'a str, Vec<Traced<'a>>>;

/// The content type of the OpenMetrics exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Units a family name may end in (`_seconds`): the base units of the Prometheus naming
/// conventions. A name ending in one gets a `# UNIT` line; any other name none.
const UNITS: [&str; 9] = [
    "seconds", "bytes", "ratio", "meters", "volts", "amperes", "joules", "grams", "celsius",
];

/// The exposition formats `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4, the default.
    Text,
    /// OpenMetrics 1.0.0 text, with exemplars.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for (several headers joined by commas), chosen as
    /// Prometheus's client_golang does (`expfmt.NegotiateIncludingOpenMetrics`): the media
    /// ranges by falling q-value, the first that is `text/plain` (version `0.0.4` or none)
    /// or `application/openmetrics-text` (version `1.0.0`, `0.0.1` or none) wins; nothing
    /// matching, or no header, is the text format. Unlike client_golang, a range with `q=0`
    /// (or an unreadable q) is refused, as HTTP says; both OpenMetrics versions get 1.0.0,
    /// the one format this encoder writes (0.0.1 was its draft's number).
    pub fn negotiate(accept: &str) -> Format {
        let mut best: Option<(f64, Format)> = None;
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim();
            let Some((kind, sub)) = media.split_once('/') else {
                continue;
            };
            let (mut q, mut version) = (1.0, "");
            for param in parts {
                let Some((key, value)) = param.split_once('=') else {
                    continue;
                };
                let value = value.trim().trim_matches('"');
                match key.trim() {
                    k if k.eq_ignore_ascii_case("q") => q = value.parse().unwrap_or(0.0),
                    k if k.eq_ignore_ascii_case("version") => version = value,
                    _ => {}
                }
            }
            let is = |a: &str, b: &str| kind.trim().eq_ignore_ascii_case(a) && sub.trim().eq_ignore_ascii_case(b);
            let offered = if is("text", "plain") && matches!(version, "" | "0.0.4") {
                Format::Text
            } else if is("application", "openmetrics-text") && matches!(version, "" | "0.0.1" | "1.0.0") {
                Format::OpenMetrics
            } else {
                continue;
            };
            // Among equal q-values the first listed keeps its place.
            if q > 0.0 && q <= 1.0 && best.is_none_or(|(b, _)| q > b) {
                best = Some((q, offered));
            }
        }
        best.map_or(Format::Text, |(_, f)| f)
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => prometheus::TEXT_FORMAT,
            Format::OpenMetrics => CONTENT_TYPE,
        }
    }
}

/// The OpenMetrics text of `families`, each counter sample (`_total`) followed by the
/// latest exemplar `exemplars` holds for its series, ending in `# EOF`.
///
/// Counters are the family name without `_total` in `# TYPE`, `# UNIT` and `# HELP`, their
/// samples with it; a counter whose name lacks `_total` is exposed as `unknown` under its
/// own name, so its series keep the name the 0.0.4 format gives them. No `_created` samples:
/// the registry keeps no creation times.
pub fn encode(families: &[MetricFamily], exemplars: &Exemplars) -> String {
    let snapshot = exemplars.snapshot();
    let mut traced: ByFamily = HashMap::new();
    for (series, exemplar) in &snapshot {
        let (family, pairs) = &**series;
        traced
            .entry(family.as_str())
            .or_default()
            .push((pairs.as_slice(), &**exemplar));
    }
    let mut out = String::with_capacity(32 * 1024);
    for mf in families {
        family(&mut out, mf, &traced);
    }
    out.push_str("# EOF\n");
    out
}

fn family(out: &mut String, mf: &MetricFamily, traced: &ByFamily<'_>) {
    let name = mf.name();
    let kind = mf.get_field_type();
    let (typed, family_name) = match kind {
        MetricType::COUNTER => match name.strip_suffix("_total") {
            Some(base) if !base.is_empty() => ("counter", base),
            _ => ("unknown", name),
        },
        MetricType::GAUGE => ("gauge", name),
        MetricType::HISTOGRAM => ("histogram", name),
        MetricType::SUMMARY => ("summary", name),
        MetricType::UNTYPED => ("unknown", name),
    };
    let _ = writeln!(out, "# TYPE {family_name} {typed}");
    if let Some(unit) = unit_of(family_name) {
        let _ = writeln!(out, "# UNIT {family_name} {unit}");
    }
    if !mf.help().is_empty() {
        let _ = write!(out, "# HELP {family_name} ");
        escape(out, mf.help());
        out.push('\n');
    }
    let held = Held::new(match typed {
        "counter" => traced.get(name).map(Vec::as_slice).unwrap_or_default(),
        _ => &[],
    });
    for m in mf.get_metric() {
        let labels = m.get_label();
        match kind {
            MetricType::COUNTER => {
                series(out, name, "", labels, None);
                value(out, m.get_counter().value());
                timestamp(out, m);
                if let Some(e) = held.of(labels) {
                    exemplar(out, e);
                }
                out.push('\n');
            }
            MetricType::GAUGE => line(out, name, "", labels, m, |o| value(o, m.get_gauge().value())),
            MetricType::UNTYPED => line(out, name, "", labels, m, |o| value(o, m.untyped.value())),
            MetricType::HISTOGRAM => histogram(out, name, m),
            MetricType::SUMMARY => summary(out, name, m),
        }
    }
}

/// The unit a family name ends in, if it is one of [`UNITS`].
fn unit_of(family_name: &str) -> Option<&'static str> {
    UNITS.into_iter().find(|unit| {
        family_name
            .strip_suffix(unit)
            .is_some_and(|rest| rest.ends_with('_') && rest.len() > 1)
    })
}

/// A histogram's buckets (cumulative, `+Inf` always), `_count`, and `_sum` where the spec
/// allows one (no negative bucket, a sum neither negative nor NaN).
fn histogram(out: &mut String, name: &str, m: &Metric) {
    let h = m.get_histogram();
    let labels = m.get_label();
    let mut inf = false;
    for b in h.get_bucket() {
        let bound = b.upper_bound();
        if bound.is_nan() {
            continue;
        }
        inf |= bound == f64::INFINITY;
        bucket(out, name, m, bound, b.cumulative_count());
    }
    if !inf {
        bucket(out, name, m, f64::INFINITY, h.sample_count());
    }
    line(out, name, "_count", labels, m, |o| count(o, h.sample_count()));
    let sum = h.sample_sum();
    let negative = h.get_bucket().iter().any(|b| b.upper_bound() < 0.0);
    if !negative && sum >= 0.0 {
        line(out, name, "_sum", labels, m, |o| value(o, sum));
    }
}

/// One `_bucket` sample: its `le` in the canonical form, its cumulative count.
fn bucket(out: &mut String, name: &str, m: &Metric, bound: f64, n: u64) {
    series(out, name, "_bucket", m.get_label(), Some(("le", bound)));
    count(out, n);
    timestamp(out, m);
    out.push('\n');
}

/// A summary's quantiles, `_sum` and `_count`.
fn summary(out: &mut String, name: &str, m: &Metric) {
    let s = m.get_summary();
    let labels = m.get_label();
    for q in s.get_quantile() {
        series(out, name, "", labels, Some(("quantile", q.quantile())));
        value(out, q.value());
        timestamp(out, m);
        out.push('\n');
    }
    line(out, name, "_sum", labels, m, |o| value(o, s.sample_sum()));
    line(out, name, "_count", labels, m, |o| count(o, s.sample_count()));
}

/// One sample line: `name suffix{labels} <what writes the value> [timestamp]`.
fn line(out: &mut String, name: &str, suffix: &str, labels: &[LabelPair], m: &Metric, v: impl FnOnce(&mut String)) {
    series(out, name, suffix, labels, None);
    v(out);
    timestamp(out, m);
    out.push('\n');
}

/// `name` + `suffix`, the labels (and `extra`, a canonical number), and the space before
/// the value.
fn series(out: &mut String, name: &str, suffix: &str, labels: &[LabelPair], extra: Option<(&str, f64)>) {
    out.push_str(name);
    out.push_str(suffix);
    if !labels.is_empty() || extra.is_some() {
        out.push('{');
        for (i, l) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(l.name());
            out.push_str("=\"");
            escape(out, l.value());
            out.push('"');
        }
        if let Some((label, number)) = extra {
            if !labels.is_empty() {
                out.push(',');
            }
            out.push_str(label);
            out.push_str("=\"");
            canonical(out, number);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
}

/// The escaping of label values and HELP text: backslash, double quote and line feed.
fn escape(out: &mut String, text: &str) {
    if !text.contains(['\\', '"', '\n']) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A sample's value as the 0.0.4 format writes it where that is valid OpenMetrics: whole
/// numbers as integers, others from 0.0001 to 1e15 in their shortest decimals (`0.25`,
/// `1795668658.4567676`); the rest in the canonical form (`1.5e-07`, `1e+21`), `+Inf`,
/// `-Inf` and `NaN` as the spec spells them (the 0.0.4 encoder writes `inf`).
fn value(out: &mut String, v: f64) {
    let magnitude = v.abs();
    if v.is_finite() && v.fract() == 0.0 && magnitude < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else if (1e-4..1e15).contains(&magnitude) {
        let _ = write!(out, "{v}");
    } else {
        canonical(out, v);
    }
}

/// A count (histogram buckets and counts): an integer, as the spec requires.
fn count(out: &mut String, n: u64) {
    let _ = write!(out, "{n}");
}

/// The spec's canonical number (for `le` and `quantile`, and any value that is not whole):
/// Go's shortest `%g` (exponent below -4 or from 6 on, at least two exponent digits), with
/// `.0` appended when it has neither a point nor an exponent: `0.005`, `1.0`, `100000.0`,
/// `1e+06`, `1e-05`.
fn canonical(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
        return;
    }
    if v.is_sign_negative() {
        out.push('-');
    }
    if v == 0.0 {
        out.push_str("0.0");
        return;
    }
    // Rust's `{:e}` gives the shortest digits that read back to `v`: `1.5e-7`, `1e6`.
    let sci = format!("{:e}", v.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs());
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = exp as usize + 1;
        if digits.len() > point {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        } else {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
            out.push_str(".0");
        }
    }
}

/// A sample's own timestamp (rare: the registry's samples have none), in seconds.
fn timestamp(out: &mut String, m: &Metric) {
    let ms = m.timestamp_ms();
    if ms != 0 {
        let sign = if ms < 0 { "-" } else { "" };
        let ms = ms.unsigned_abs();
        let _ = write!(out, " {sign}{}.{:03}", ms / 1000, ms % 1000);
    }
}

/// One counter family's exemplars, found by a hash of a series' label pairs (in any order),
/// so each sample is looked up once, not against every exemplar of its family.
struct Held<'a> {
    exemplars: &'a [Traced<'a>],
    by_hash: HashMap<u64, Vec<usize>>,
}

impl<'a> Held<'a> {
    fn new(exemplars: &'a [Traced<'a>]) -> Self {
        let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::with_capacity(exemplars.len());
        for (i, (pairs, _)) in exemplars.iter().enumerate() {
            let hash = pairs_hash(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            by_hash.entry(hash).or_default().push(i);
        }
        Held { exemplars, by_hash }
    }

    /// The exemplar of the series whose label pairs are `labels`.
    fn of(&self, labels: &[LabelPair]) -> Option<&'a Exemplar> {
        if self.exemplars.is_empty() {
            return None;
        }
        let hash = pairs_hash(labels.iter().map(|l| (l.name(), l.value())));
        self.by_hash
            .get(&hash)?
            .iter()
            .map(|&i| &self.exemplars[i])
            .find(|(pairs, _)| {
                pairs.len() == labels.len()
                    && pairs
                        .iter()
                        .all(|(k, v)| labels.iter().any(|l| l.name() == k && l.value() == v))
            })
            .map(|(_, e)| *e)
    }
}

/// A hash of label pairs that does not depend on their order.
fn pairs_hash<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> u64 {
    let state = FixedState::default();
    pairs.fold(0u64, |sum, pair| sum.wrapping_add(state.hash_one(pair)))
}

/// ` # {trace_id="…",span_id="…"} value timestamp`, or nothing for an exemplar the spec
/// would refuse: a label set over 128 characters, an empty trace id, a value not finite.
fn exemplar(out: &mut String, e: &Exemplar) {
    let trace = &e.trace;
    let chars = "trace_id".len()
        + trace.trace_id.chars().count()
        + trace
            .span_id
            .as_ref()
            .map_or(0, |s| "span_id".len() + s.chars().count());
    if chars > MAX_LABEL_CHARS || trace.trace_id.is_empty() || !e.value.is_finite() {
        tracing::debug!(trace_id = %trace.trace_id, "exemplar left out of the exposition: not valid OpenMetrics");
        return;
    }
    out.push_str(" # {trace_id=\"");
    escape(out, &trace.trace_id);
    out.push('"');
    if let Some(span) = &trace.span_id {
        out.push_str(",span_id=\"");
        escape(out, span);
        out.push('"');
    }
    out.push_str("} ");
    value(out, e.value);
    if let Ok(since) = e.at.duration_since(UNIX_EPOCH) {
        let _ = write!(out, " {}.{:03}", since.as_secs(), since.subsec_millis());
    }
}

#[cfg(test)]
#[path = "openmetrics_tests.rs"]
mod tests;
