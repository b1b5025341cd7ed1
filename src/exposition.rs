//! Reading the Prometheus text exposition format, for the parts that check an exporter from
//! outside (the drill's counter checks, the tests): samples as name, labels and value.
//!
//! Only the sample lines are read; `# HELP` / `# TYPE` comments and blank lines are skipped.

/// One sample line: `name{label="value",…} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if the sample has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Whether every `(key, value)` of `wanted` is among the sample's labels.
    pub fn has_labels(&self, wanted: &[(&str, &str)]) -> bool {
        wanted.iter().all(|(k, v)| self.label(k) == Some(*v))
    }
}

/// Every sample of `text`, in order; lines that are not samples are skipped.
pub fn samples(text: &str) -> impl Iterator<Item = Sample> + '_ {
    text.lines().filter_map(parse_line)
}

/// The value of the one sample named `name` whose labels include all of `labels`; `None`
/// when no sample or more than one matches.
pub fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = samples(text).filter(|s| s.name == name && s.has_labels(labels));
    let first = found.next()?;
    found.next().is_none().then_some(first.value)
}

/// Every metric name exported (histogram series `x_bucket`, `x_sum`, `x_count` included).
pub fn names(text: &str) -> std::collections::BTreeSet<String> {
    samples(text).map(|s| s.name).collect()
}

/// One line, or `None` for comments, blank lines and lines that do not parse.
pub fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (series, rest) = match line.find('{') {
        Some(open) => {
            let close = closing_brace(line, open)?;
            (&line[..=close], &line[close + 1..])
        }
        None => line.split_at(line.find(' ')?),
    };
    // The value, then an optional timestamp.
    let value = parse_value(rest.split_whitespace().next()?)?;
    let (name, labels) = match series.split_once('{') {
        Some((n, l)) => (n, split_labels(l.strip_suffix('}')?)),
        None => (series, Vec::new()),
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// Index of the `}` closing the label set opened at `open`, skipping quoted values.
fn closing_brace(line: &str, open: usize) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in line[open..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(open + i),
            _ => {}
        }
    }
    None
}

/// `a="x",b="y\"z"` into pairs, escapes undone.
fn split_labels(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some((k, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, e)) => value.push(e),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.push((k.trim_start_matches(',').trim().to_string(), value));
        rest = &after[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP lockwatch_up 1 when the last sample pass of the target succeeded.
# TYPE lockwatch_up gauge
lockwatch_up{target="main"} 1
lockwatch_lock_events_total{namespace="a",op="renew",outcome="not_owned"} 3
lockwatch_lock_events_total{namespace="b",op="renew",outcome="not_owned"} 0
odd{v="x} y\"z"} 2.5 1700000000000
lockwatch_lock_ttl_remaining_seconds_bucket{le="+Inf",namespace="a",target="main"} 7
process_start_time_seconds 1.7e9
"#;

    #[test]
    fn reads_names_labels_values_and_escapes() {
        assert_eq!(value(TEXT, "lockwatch_up", &[("target", "main")]), Some(1.0));
        assert_eq!(
            value(
                TEXT,
                "lockwatch_lock_events_total",
                &[("namespace", "a"), ("op", "renew")]
            ),
            Some(3.0)
        );
        // Two samples match: ambiguous, so no answer.
        assert_eq!(value(TEXT, "lockwatch_lock_events_total", &[("op", "renew")]), None);
        assert_eq!(value(TEXT, "odd", &[("v", "x} y\"z")]), Some(2.5));
        assert_eq!(value(TEXT, "process_start_time_seconds", &[]), Some(1.7e9));
        let bucket = samples(TEXT)
            .find(|s| s.name.ends_with("_bucket"))
            .map(|s| (s.label("le").map(str::to_string), s.value));
        assert_eq!(bucket, Some((Some("+Inf".to_string()), 7.0)));
        assert_eq!(names(TEXT).len(), 5);
    }

    #[test]
    fn garbage_is_skipped_not_a_panic() {
        for line in ["{", "x{a=\"1\"", "x 1 2 3", "x{a=\"1\"} notanumber", "}", "\u{0} 1"] {
            let _ = parse_line(line);
        }
        assert!(parse_line("x{a=\"1\"} notanumber").is_none());
    }
}
